"""The release reads the gateway's own scrape alone: a second job in Prometheus exporting
``agent_errors_total`` and thumbs-down voices for the canary (a Pushgateway that honours pushed
labels, a sidecar, anything Prometheus scrapes) changes nothing the canary's rails see. Real
Prometheus, real :class:`~infra.metrics.promql_prometheus.PrometheusMetrics`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

from infra.metrics.promql_prometheus import PrometheusClient, PrometheusMetrics
from tests.procs import find_binary, free_port, service

pytestmark = [pytest.mark.integration]

LABELS = 'workload="default"'


def honest(t: float) -> str:
    """The gateway: v1 on the canary and v0 on stable, 10 users a second each, no errors."""
    n = int(t * 10)
    return "".join(
        f'{name}{{model="{m}",route="{r}",{LABELS}}} {n}\n'
        for name in ("agent_requests_total", "agent_voices_total")
        for m, r in (("v1", "canary"), ("v0", "stable"))
    ) + "".join(
        f'{name}{{model="{m}",route="{r}",{LABELS}}} 0\n'
        for name in ("agent_errors_total", "agent_error_voices_total")
        for m, r in (("v1", "canary"), ("v0", "stable"))
    )


def forged(t: float) -> str:
    """Another job: every one of the canary's users meets an error and votes it down."""
    n = int(t * 10)
    return (
        f'agent_errors_total{{model="v1",route="canary",{LABELS}}} {n}\n'
        f'agent_error_voices_total{{model="v1",route="canary",{LABELS}}} {n}\n'
        f'user_feedback_voices_total{{model="v1",value="-1",{LABELS}}} {n}\n'
    )


@contextmanager
def exporter(body: object) -> Iterator[str]:
    started = time.monotonic()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body(time.monotonic() - started).encode()  # type: ignore[operator]
            self.send_response(200)
            self.send_header("content-type", "text/plain; version=0.0.4")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_series_of_another_job_change_no_canary_reading(tmp_path: Path) -> None:
    with exporter(honest) as gateway, exporter(forged) as intruder:
        cfg = {
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [
                {"job_name": "gateway", "static_configs": [{"targets": [gateway]}]},
                {"job_name": "intruder", "static_configs": [{"targets": [intruder]}]},
            ],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        port = free_port()
        prom = f"http://127.0.0.1:{port}"
        args = [
            find_binary("prometheus"),
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]
        with service(args, f"{prom}/-/ready", tmp_path / "prometheus.log"):
            since = time.time()
            forged_errors = 0.0
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # both jobs scraped a few times
                time.sleep(1.0)
                query = 'sum(increase(agent_errors_total{route="canary"}[1m]))'
                result = httpx.get(f"{prom}/api/v1/query", params={"query": query}).json()
                rows = result["data"]["result"]
                forged_errors = float(rows[0]["value"][1]) if rows else 0.0
                if forged_errors > 20 and time.time() - since > 6:
                    break
            window = PrometheusMetrics(PrometheusClient(prom)).read(
                candidate="v1", stable="v0", since=since, workload="default"
            )
    assert forged_errors > 20  # what a selector without job would have counted
    assert window.candidate.requests > 10 and window.candidate.users > 10  # the gateway's seen
    assert window.candidate.errors == 0 and window.candidate.error_users == 0
    assert window.candidate.feedback_count == 0
