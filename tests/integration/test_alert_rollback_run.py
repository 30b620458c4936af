"""Every rollback names what it rolls back (DESIGN "Release state machine"): after an alert the
gateway asks Prefect for a ``rollback`` run naming the version and release it rolled back, so a
run that starts late (the Prefect worker was busy; meanwhile that release ended and the next
candidate is in canary) leaves the next release alone, while a run for the current release
still rolls it back. Real gateway, real Prefect runs of the flow, routing through the admin API
as in production."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from infra.catalog import get_table, open_catalog, scan
from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.parts import Intervals
from infra.routing import GatewayRouting, RoutingState, load_state, save_state
from infra.settings import ReleaseSettings, Settings, get_settings
from infra.store import open_store
from tasks.release.machine import transitions
from tests.fakes.upstream import EchoUpstream
from tests.integration.test_gateway_admin import AUTH, TOKEN, webhook

pytestmark = pytest.mark.integration

POLICY = ReleaseSettings(canary_steps=(25, 100))
Asked = list[tuple[str, dict[str, str]]]


@pytest.fixture
def env(flywheel_home, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Stable v0; v0-v2 servable (upstreams configured; the gateway is handed echo ones)."""
    upstreams = {v: "http://127.0.0.1:9/v1" for v in ("v0", "v1", "v2")}
    monkeypatch.setenv("FLYWHEEL_GATEWAY__UPSTREAMS", json.dumps(upstreams))
    monkeypatch.setenv("FLYWHEEL_GATEWAY__DIVERSE_FRACTION", "0")
    monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_TOKEN", TOKEN)
    get_settings.cache_clear()
    settings = get_settings()
    save_state(open_store(settings), RoutingState(stable="v0"))
    get_table(open_catalog(settings), "audit_log")  # before the gateway and the flow race for it
    return settings


@contextmanager
def gateway(
    env: Settings, monkeypatch: pytest.MonkeyPatch, asked: Asked
) -> Iterator[tuple[GatewayHandle, threading.Event]]:
    """The gateway, whose request for a rollback run is only recorded in ``asked`` (Prefect's
    worker is busy: the run starts when the test says); the flow routes through its admin
    API. The event is set once a run was asked for."""
    queued = threading.Event()

    def prefect_busy(reason: str, **release: str) -> None:
        asked.append((reason, release))
        queued.set()

    echo = {v: EchoUpstream(v) for v in ("v0", "v1", "v2")}
    with start_background_gateway(
        env,
        port=0,
        store=open_store(env),
        upstreams=echo,
        intervals=Intervals(state_s=0.1),
        on_rollback=prefect_busy,
    ) as gw:
        monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_URL", gw.admin_url or "")
        get_settings.cache_clear()
        yield gw, queued
        for thread in gw.app.state.admin.threads:  # the gateway's audit writes
            thread.join(10)


def in_canary(routing: GatewayRouting, version: str) -> RoutingState:
    transitions.begin_release(routing, None, version, actor="flow")
    return transitions.canary_move(
        routing, None, version, step=0, policy=POLICY, actor="f"
    ).or_raise()


def users_served(gw: GatewayHandle, n: int = 100) -> set[str]:
    body = {"messages": [{"role": "user", "content": "hi"}]}
    return {
        httpx.post(  # the serving version is told to the admin token's holder only
            f"{gw.admin_url}/v1/chat/completions", json={**body, "user": f"u{i}"}, headers=AUTH
        ).headers["x-flywheel-model"]
        for i in range(n)
    }


def audit(env: Settings, event_type: str) -> list[dict[str, Any]]:
    rows = scan(open_catalog(env), "audit_log").to_pylist()
    return sorted((r for r in rows if r["event_type"] == event_type), key=lambda r: r["at"])


def fire(gw: GatewayHandle, model: str, queued: threading.Event) -> None:
    """Alertmanager posts a firing alert for ``model``; the gateway rolls it back."""
    resp = httpx.post(f"{gw.admin_url}/admin/alerts", json=webhook(model, "fp-1"), headers=AUTH)
    assert resp.status_code == 200 and resp.json()["rolled_back"] is True
    assert queued.wait(10)
    queued.clear()


def test_a_late_alert_rollback_run_leaves_the_next_release_alone(
    prefect_api, env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.rollback import rollback

    asked: Asked = []
    with gateway(env, monkeypatch, asked) as (gw, queued):
        routing = GatewayRouting(str(gw.admin_url), TOKEN)
        r1 = in_canary(routing, "v1")
        fire(gw, "v1", queued)
        r2 = in_canary(routing, "v2")  # the next release, while the rollback run waits
        [(reason, release)] = asked
        assert release == {"version": "v1", "release_id": r1.release_id}
        late = rollback(reason=reason, actor="alertmanager", **release)
        served = users_served(gw)
    stored = load_state(open_store(env))
    assert (stored.candidate, stored.phase, stored.weight) == ("v2", "canary", 25.0)
    assert (stored.release_id, stored.revision) == (r2.release_id, r2.revision)
    assert stored.rejected == ["v1"] and served == {"v0", "v2"}
    assert late["rolled_back"] is False and "nothing changed" in late["stale"]
    assert len(asked) == 1  # nothing rolled back: no further run asked for
    [event] = audit(env, "stale_decision")
    details = json.loads(event["details"])
    assert (event["subject"], details["release_id"]) == ("v1", r1.release_id)
    assert details["current_release_id"] == r2.release_id


def test_an_alert_rollback_run_for_the_current_release_still_rolls_it_back(
    prefect_api, env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.rollback import rollback

    asked: Asked = []
    with gateway(env, monkeypatch, asked) as (gw, queued):
        routing = GatewayRouting(str(gw.admin_url), TOKEN)
        r1 = in_canary(routing, "v1")
        fire(gw, "v1", queued)
        [(reason, release)] = asked
        assert release == {"version": "v1", "release_id": r1.release_id}
        run = rollback(reason=reason, actor="alertmanager", **release)  # on time
        r2 = in_canary(routing, "v2")
        # a person names the release in the UI: the wrong version changes nothing,
        wrong = rollback(reason="worse", actor="oncall", version="v1")
        assert "nothing changed" in wrong["stale"] and routing.load().weight == 25
        # the right one rolls it back
        named = rollback(reason="worse", actor="oncall", version="v2", release_id=r2.release_id)
        served = users_served(gw)
    assert "stale" not in run and run["state"]["release_id"] == r1.release_id
    assert (named["rolled_back"], named["version"]) == (True, "v2")
    stored = load_state(open_store(env))
    assert (stored.candidate, stored.phase, stored.weight) == (None, "rolled_back", 0.0)
    assert stored.rejected == ["v1", "v2"] and served == {"v0"}
    flow_events = [json.loads(e["details"]) for e in audit(env, "rollback_flow")]
    assert [e["release_id"] for e in flow_events] == [r1.release_id, r2.release_id]
