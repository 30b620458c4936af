"""End to end on loopback with the real binaries: the gateway over two HTTP upstreams (the
candidate failing a share of requests), Prometheus scraping it with the repo's alert rules,
Alertmanager with the repo's config calling the gateway's /admin/alerts. The repo's files are
used as they are, in temp copies where only ``for:`` and range windows are shortened and
service addresses point at the loopback ports.

Also: canary analysis through Prometheus's HTTP API with the release's own PromQL, where a step
without traffic must not pass."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from infra.gateway.parts import Intervals
from infra.gateway.serve import GatewayHandle, start_background_gateway
from infra.routing import RoutingState, load_state, save_state
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from tests.fakes.upstream import FakeUpstreamHandle, start_fake_upstream
from tests.procs import find_binary, free_port, service

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.serial]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "e2e-admin-token-0123456789abcdef0123"
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}
# The release rules' minimum counts are users (10 who met an error, 20 voting), not a share of
# the window, so a shortened window must still hold that many of a test's users: the feedback
# window (30m) keeps 2 minutes.
FOR, WINDOWS = "3s", {"5m": "15s", "30m": "120s", "1h": "240s"}


def short_rules(dst: Path, windows: dict[str, str] | None = None) -> Path:
    """The repo's rules with every ``for:`` at :data:`FOR` and the range windows shortened
    (:data:`WINDOWS`, or ``windows``)."""
    shorter = windows or WINDOWS
    text = (ROOT / "infra/prometheus/rules.yml").read_text()
    text = re.sub(r"(\n\s+for:\s*)\S+", rf"\g<1>{FOR}", text)
    text = re.sub(r"\[(5m|30m|1h)\]", lambda m: f"[{shorter[m.group(1)]}]", text)
    dst.write_text(text)
    return dst


def prometheus_config(
    tmp: Path,
    *,
    gateway: str,
    alertmanager: str,
    self_addr: str,
    windows: dict[str, str] | None = None,
) -> Path:
    """The repo's Prometheus config on loopback; ``gateway``: the admin listener's
    ``host:port`` (it scrapes ``/admin/metrics`` with the admin token); ``windows``: the
    rules' shortened windows (:data:`WINDOWS` by default)."""
    cfg = yaml.safe_load((ROOT / "infra/prometheus/prometheus.yml").read_text())
    (tmp / "token").write_text(TOKEN)
    cfg["global"].update(scrape_interval="1s", evaluation_interval="1s")
    cfg["rule_files"] = [str(short_rules(tmp / "rules.yml", windows))]
    cfg["alerting"]["alertmanagers"][0]["static_configs"] = [{"targets": [alertmanager]}]
    targets = {"gateway": gateway, "alertmanager": alertmanager, "prometheus": self_addr}
    jobs = []
    for job in cfg["scrape_configs"]:
        if job["job_name"] in targets:
            job["static_configs"] = [{"targets": [targets[job["job_name"]]]}]
            job["scrape_interval"] = "1s"
            if "authorization" in job:
                job["authorization"]["credentials_file"] = str(tmp / "token")
            jobs.append(job)
    cfg["scrape_configs"] = jobs  # the pushgateway job has nothing to scrape here
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def alertmanager_config(tmp: Path, *, admin_url: str) -> Path:
    cfg = yaml.safe_load((ROOT / "infra/alertmanager/alertmanager.yml").read_text())
    (tmp / "token").write_text(TOKEN)
    for receiver in cfg["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = f"{admin_url}/admin/alerts"
            hook["http_config"]["authorization"]["credentials_file"] = str(tmp / "token")
    path = tmp / "alertmanager.yml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@dataclass
class Stack:
    gateway: GatewayHandle
    prometheus: str
    store: LocalStore
    settings: Settings
    upstreams: dict[str, FakeUpstreamHandle]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    prom_bin, am_bin = find_binary("prometheus"), find_binary("alertmanager")
    with ExitStack() as stack:
        ups = {"v0": start_fake_upstream("v0"), "v1": start_fake_upstream("v1", fail_rate=0.5)}
        for handle in ups.values():
            stack.callback(handle.stop)
        settings = Settings(
            home=tmp_path / "home",
            gateway=GatewaySettings(
                admin_token=TOKEN,
                upstreams={v: h.url for v, h in ups.items()},
                diverse_fraction=0,
            ),
        )
        store = LocalStore(settings.resolved_store_url)
        save_state(store, RoutingState(stable="v0"))
        gw = start_background_gateway(
            settings, port=0, store=store, intervals=Intervals(state_s=0.2)
        )
        stack.callback(gw.stop)
        assert gw.admin_url is not None  # Alertmanager calls the admin listener
        am_port, prom_port = free_port(), free_port()
        am_args = [
            am_bin,
            f"--config.file={alertmanager_config(tmp_path, admin_url=gw.admin_url)}",
            f"--storage.path={tmp_path / 'am'}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address=",
        ]
        stack.enter_context(
            service(am_args, f"http://127.0.0.1:{am_port}/-/ready", tmp_path / "alertmanager.log")
        )
        prom_cfg = prometheus_config(
            tmp_path,
            gateway=gw.admin_url.removeprefix("http://"),
            alertmanager=f"127.0.0.1:{am_port}",
            self_addr=f"127.0.0.1:{prom_port}",
        )
        prom_args = [
            prom_bin,
            f"--config.file={prom_cfg}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ]
        prom = f"http://127.0.0.1:{prom_port}"
        stack.enter_context(service(prom_args, f"{prom}/-/ready", tmp_path / "prometheus.log"))
        yield Stack(gw, prom, store, settings, ups)


@dataclass
class Traffic:
    """Users sending requests (each a different user, so ~weight % reach the canary)."""

    url: str
    replies: list[tuple[float, int, str]] = field(default_factory=list)  # (time, status, route)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        messages = [{"role": "user", "content": "What is 23+58?"}]
        with httpx.Client(base_url=self.url, timeout=10) as client:
            for i in range(6000):  # bounded: ~20 requests/s for at most ~5 minutes
                if self.stop.is_set():
                    return
                body = {"model": "flywheel", "user": f"user-{i}", "messages": messages}
                # the admin token: the answer names its route (no user's answer does)
                resp = client.post("/v1/chat/completions", json=body, headers=OPERATOR)
                self.replies.append(
                    (time.time(), resp.status_code, resp.headers.get("x-flywheel-route", ""))
                )
                self.stop.wait(0.05)

    def __enter__(self) -> Traffic:
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(15)


def firing_since(prometheus: str, alertname: str) -> float | None:
    """When ``alertname`` started firing (its pending start plus ``for:``), or None."""
    alerts = httpx.get(f"{prometheus}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    for alert in alerts:
        if alert["labels"].get("alertname") == alertname and alert["state"] == "firing":
            active = alert["activeAt"].replace("Z", "+00:00")
            from datetime import datetime

            return datetime.fromisoformat(active).timestamp() + float(FOR.rstrip("s"))
    return None


def audit_rows(settings: Settings) -> list[dict[str, Any]]:
    from infra.catalog import open_catalog, scan

    return scan(open_catalog(settings), "audit_log").to_pylist()


def route_half_to_candidate(stack: Stack) -> None:
    """Route 50 % of users to v1 and wait until the gateway serves that state."""
    state = RoutingState(stable="v0", candidate="v1", phase="canary", weight=50)
    save_state(stack.store, state, force=True)
    deadline = time.time() + 10
    state_url = f"{stack.gateway.admin_url}/admin/state"  # no candidate is public
    while httpx.get(state_url, headers=OPERATOR, timeout=5).json()["candidate"] != "v1":
        assert time.time() < deadline, "the gateway did not pick up the routing state"
        time.sleep(0.05)


def test_alert_rolls_the_failing_candidate_back_without_failing_users(stack: Stack) -> None:
    route_half_to_candidate(stack)
    fired = rolled_back = None
    with Traffic(str(stack.gateway.admin_url)) as traffic:  # the operator sees routes
        deadline = time.time() + 150
        while time.time() < deadline and rolled_back is None:
            fired = fired or firing_since(stack.prometheus, "CandidateModelRegression")
            try:  # a probe, not a user: a slow answer is retried, users are counted below
                health = httpx.get(
                    f"{stack.gateway.admin_url}/admin/state", headers=OPERATOR, timeout=5
                ).json()
            except httpx.TimeoutException:
                continue
            if health["candidate"] is None and health["weight"] == 0:
                rolled_back = time.time()
            time.sleep(0.2)
        time.sleep(2)  # users keep coming after the rollback
    assert rolled_back is not None, "the candidate was never rolled back"
    fired = fired or firing_since(stack.prometheus, "CandidateModelRegression")
    assert fired is not None, "CandidateModelRegression never fired"
    print(
        f"\nalert firing -> candidate weight 0: {rolled_back - fired:.1f} s; "
        f"{len(traffic.replies)} requests"
    )
    assert rolled_back - fired <= 30
    statuses = Counter(status for _, status, _ in traffic.replies)
    assert statuses == {200: len(traffic.replies)}, statuses  # no user saw a failure
    routes = Counter(route for _, _, route in traffic.replies)
    assert routes["canary"] > 0 and stack.upstreams["v1"].app.calls > routes["canary"]
    assert all(route == "stable" for at, _, route in traffic.replies if at > rolled_back + 1)
    state = load_state(stack.store)
    assert (state.phase, state.rejected) == ("rolled_back", ["v1"])
    for thread in stack.gateway.app.state.admin.threads:
        thread.join(15)
    rollback = [r for r in audit_rows(stack.settings) if r["event_type"] == "rollback"]
    assert len(rollback) == 1 and rollback[0]["actor"] == "alertmanager"
    details = json.loads(rollback[0]["details"])
    assert "CandidateModelRegression" in details["reason"]
    assert details["evidence"]["alerts"][0]["labels"]["model"] == "v1"


def test_canary_analysis_through_prometheus_never_passes_without_traffic(stack: Stack) -> None:
    from infra.metrics.promql_prometheus import PrometheusClient, PrometheusMetrics
    from infra.routing import StoreRouting
    from infra.settings import ReleaseSettings
    from tasks.release.canary.canary import watch_step
    from tasks.release.canary.rollout import Clock

    stack.upstreams["v1"].app.fail_rate = 0.0
    route_half_to_candidate(stack)
    metrics = PrometheusMetrics(PrometheusClient(stack.prometheus))
    cfg = ReleaseSettings(
        analysis_interval_s=3, step_deadline_s=8, min_requests_per_step=20, max_poll_s=0.5
    )

    def step() -> Any:
        return watch_step(
            StoreRouting(stack.store),
            "v1",
            stable="v0",
            metrics=metrics,
            policy=cfg,
            clock=Clock(),
        )

    started = time.time()
    idle = step()
    assert idle.verdict == "no_data" and time.time() - started >= cfg.step_deadline_s
    assert "0 candidate requests < 20 required" in idle.reasons[0]
    with Traffic(stack.gateway.url):
        time.sleep(3)  # let Prometheus see the series before the step starts
        busy = step()
    assert busy.verdict == "pass", busy.reasons
    cand = busy.evidence["candidate"]
    assert cand["requests"] >= 20 and cand["errors"] == 0 and cand["p99_s"] is not None
    assert busy.evidence["source"] == "prometheus" and busy.evidence["stable"]["requests"] > 0
