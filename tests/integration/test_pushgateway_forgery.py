"""Whoever can push to the Pushgateway (compose puts it behind basic auth; a leaked password,
or a Pushgateway run without it, still lets anyone push). A push of the gateway's
series (``agent_errors_total`` under job="gateway", say) must not reach what a release decides
on: the repository's Prometheus configuration drops them from the Pushgateway's scrape, while
the stage metrics the flows push still arrive."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.procs import find_binary, free_port, pushgateway, service

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]

FORGED = """\
# TYPE agent_errors_total counter
agent_errors_total{model="v1",route="canary",workload="default"} 500
# TYPE agent_error_voices_total counter
agent_error_voices_total{model="v1",route="canary",workload="default"} 50
# TYPE user_feedback_voices_total counter
user_feedback_voices_total{model="v1",value="-1",workload="default"} 40
# TYPE flywheel_route_weight gauge
flywheel_route_weight{model="v1"} 100
# TYPE flywheel_stage_records_total counter
flywheel_stage_records_total{outcome="in"} 7
"""


def _config(tmp: Path, pushgateway_addr: str) -> Path:
    cfg = yaml.safe_load((ROOT / "infra/prometheus/prometheus.yml").read_text())
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "pushgateway"]
    job["static_configs"] = [{"targets": [pushgateway_addr]}]
    job.pop("basic_auth", None)  # this Pushgateway takes anyone: the worst case
    job["scrape_interval"] = "1s"
    cfg = {"global": {"scrape_interval": "1s"}, "scrape_configs": [job]}
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _names(prom: str, selector: str) -> set[str]:
    body = httpx.get(f"{prom}/api/v1/query", params={"query": selector}, timeout=5).json()
    return {r["metric"]["__name__"] for r in body["data"]["result"]}


def test_a_pushed_gateway_series_never_reaches_prometheus(tmp_path: Path) -> None:
    with pushgateway(tmp_path) as push_url:
        # the forger names job="gateway" itself (honor_labels keeps pushed job labels)
        pushed = httpx.put(f"{push_url}/metrics/job/gateway/instance/x", content=FORGED)
        assert pushed.status_code in (200, 202)
        port = free_port()
        prom = f"http://127.0.0.1:{port}"
        args = [
            find_binary("prometheus"),
            f"--config.file={_config(tmp_path, push_url.removeprefix('http://'))}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]
        with service(args, f"{prom}/-/ready", tmp_path / "prometheus.log"):
            deadline = time.monotonic() + 60
            while not _names(prom, "flywheel_stage_records_total") and time.monotonic() < deadline:
                time.sleep(0.5)
            assert _names(prom, "flywheel_stage_records_total")  # the scrape happened
            forged = '{__name__=~"agent_.*|user_feedback_.*|flywheel_route_.*"}'
            assert _names(prom, forged) == set()
