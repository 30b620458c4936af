"""The Alertmanager webhook acts once per release, and only once its rollback is durably
written: the same alert in the next release rolls it back again, a failed state write answers
503 without remembering the alert (Alertmanager's retry then rolls back and the rollback
deployment is asked for), and an alert for a just-promoted version rolls back to the previous
stable during the bake period."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest

from infra.catalog import get_table, open_catalog, scan
from infra.errors import TransientStoreError
from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.parts import Intervals
from infra.keys import STATE_KEY
from infra.routing import GatewayRouting, RoutingState, load_state, save_state
from infra.settings import ReleaseSettings
from infra.store import LocalStore
from tasks.release.machine import transitions
from tests.fakes.upstream import EchoUpstream
from tests.integration.test_gateway_admin import (
    AUTH,
    TOKEN,
    canary_state,
    rollback_events,
    settings_for,
    start,
    webhook,
)

pytestmark = pytest.mark.integration

POLICY = ReleaseSettings(canary_steps=(25, 100))


class FlakyStateStore(LocalStore):
    """A local store whose next ``fail`` writes of the routing state fail (a 5xx from S3)."""

    fail = 0

    def put_if(self, key: str, data: bytes, *, etag: str | None) -> str:
        if key == STATE_KEY and self.fail > 0:
            self.fail -= 1
            raise TransientStoreError("PUT deploy/state.json: HTTP 503")
        return super().put_if(key, data, etag=etag)


def start_on(tmp_path: Path, store: LocalStore, state: RoutingState, **kw: object) -> GatewayHandle:
    """The gateway (echo upstreams v0-v2) on ``store``, holding ``state``."""
    get_table(open_catalog(settings_for(tmp_path)), "audit_log")  # before the gateway opens it
    save_state(store, state)
    upstreams = {v: EchoUpstream(v) for v in ("v0", "v1", "v2")}
    return start_background_gateway(
        settings_for(tmp_path),
        port=0,
        store=store,
        upstreams=upstreams,
        intervals=Intervals(state_s=0.1),
        **kw,
    )


def alert(gw_admin: str, model: str, fingerprint: str) -> httpx.Response:
    return httpx.post(f"{gw_admin}/admin/alerts", json=webhook(model, fingerprint), headers=AUTH)


def chat_versions(gw_url: str, n: int = 40) -> set[str]:
    """The versions that answered ``n`` users (asked with the admin token: only its answers
    name the version)."""
    body = {"messages": [{"role": "user", "content": "hi"}]}
    return {
        httpx.post(
            f"{gw_url}/v1/chat/completions", json={**body, "user": f"u{i}"}, headers=AUTH
        ).headers["x-flywheel-model"]
        for i in range(n)
    }


def test_the_same_alert_rolls_back_the_next_release_of_the_version(tmp_path: Path) -> None:
    with start(tmp_path) as gw:
        routing = GatewayRouting(str(gw.admin_url), TOKEN)
        transitions.begin_release(routing, None, "v1", actor="flow")
        transitions.canary_move(routing, None, "v1", step=0, policy=POLICY, actor="flow").or_raise()
        assert alert(str(gw.admin_url), "v1", "fp-1").json()["rolled_back"] is True
        # a person forces v1 again; the alert (same labels, same fingerprint) fires again
        transitions.begin_release(routing, None, "v1", actor="person", force=True)
        transitions.canary_move(routing, None, "v1", step=0, policy=POLICY, actor="flow").or_raise()
        again = alert(str(gw.admin_url), "v1", "fp-1").json()
        assert again["rolled_back"] is True and again["duplicates"] == 0
        assert alert(str(gw.admin_url), "v1", "fp-1").json()["duplicates"] == 1
    stored = load_state(LocalStore(tmp_path / "store"))
    assert (stored.candidate, stored.weight, stored.rejected) == (None, 0.0, ["v1"])
    assert [h.to_phase for h in stored.history].count("rolled_back") == 2


def test_a_failed_state_write_is_not_a_decision_and_the_retry_rolls_back(
    tmp_path: Path,
) -> None:
    store = FlakyStateStore(tmp_path / "store")
    asked: list[str] = []
    done = threading.Event()

    def on_rollback(reason: str, **release: str) -> None:
        asked.append(f"{reason} ({release.get('version')})")
        done.set()

    with start_on(tmp_path, store, canary_state(), on_rollback=on_rollback) as gw:
        store.fail = 100  # the store is down for longer than the write's retries
        first = alert(str(gw.admin_url), "v1", "fp-9")
        assert first.status_code == 503 and "not written" in first.text
        assert load_state(store).weight == 25 and asked == []
        store.fail = 0  # the store is back; Alertmanager retries the same notification
        retry = alert(str(gw.admin_url), "v1", "fp-9")
        assert retry.status_code == 200 and retry.json()["rolled_back"] is True
        assert done.wait(10)
        assert chat_versions(str(gw.admin_url)) == {"v0"}
    stored = load_state(store)
    assert (stored.candidate, stored.weight, stored.rejected) == (None, 0.0, ["v1"])
    assert len(asked) == 1 and "v1" in asked[0]
    assert len(rollback_events(tmp_path, 1)) == 1


def test_a_transient_state_write_failure_is_retried_within_the_webhook(tmp_path: Path) -> None:
    store = FlakyStateStore(tmp_path / "store")
    with start_on(tmp_path, store, canary_state()) as gw:
        store.fail = 2
        resp = alert(str(gw.admin_url), "v1", "fp-3")
        assert resp.status_code == 200 and resp.json()["rolled_back"] is True
    assert load_state(store).weight == 0


def test_an_alert_for_the_promoted_version_rolls_back_during_the_bake_period(
    tmp_path: Path,
) -> None:
    with start(tmp_path, RoutingState(stable="v0")) as gw:
        routing = GatewayRouting(str(gw.admin_url), TOKEN)
        transitions.begin_release(routing, None, "v1", actor="flow")
        transitions.canary_move(routing, None, "v1", step=1, policy=POLICY, actor="flow").or_raise()
        transitions.promotion(routing, None, "v1", actor="flow", reason="passed").or_raise()
        assert chat_versions(str(gw.admin_url)) == {"v1"}
        resp = alert(str(gw.admin_url), "v1", "fp-after")
        assert resp.status_code == 200 and resp.json()["rolled_back"] is True
        assert chat_versions(str(gw.admin_url)) == {"v0"}  # at once, on this worker
        unrelated = alert(str(gw.admin_url), "v0", "fp-stable").json()
        assert unrelated["rolled_back"] is False and unrelated["matched"] == 0
    stored = load_state(LocalStore(tmp_path / "store"))
    assert (stored.stable, stored.phase, stored.rejected) == ("v0", "rolled_back", ["v1"])
    [event] = rollback_events(tmp_path, 1)
    assert (event["actor"], event["subject"]) == ("alertmanager", "v1")


def test_a_stale_run_through_the_gateway_changes_nothing_and_is_audited(tmp_path: Path) -> None:
    from tasks.release.canary.rollout import PhaseResult
    from tasks.release.machine import controls, machine

    catalog = open_catalog(settings_for(tmp_path))
    failed = PhaseResult(verdict="fail", reasons=["error ratio 3x stable"])
    with start(tmp_path) as gw:
        routing = GatewayRouting(str(gw.admin_url), TOKEN)
        v1 = transitions.begin_release(routing, catalog, "v1", actor="flow")
        controls.abort(routing, catalog, actor="person", reason="wrong data")
        transitions.begin_release(routing, catalog, "v2", actor="flow")
        v2 = transitions.canary_move(
            routing, catalog, "v2", step=0, policy=POLICY, actor="f"
        ).or_raise()
        found = machine.conclude(
            routing,
            catalog,
            "v1",
            at=machine.Step("canary"),
            result=failed,
            policy=POLICY,
            actor="flow",
            release_id=v1.release_id,
        )
        assert found.candidate == "v2" and routing.load().revision == v2.revision
        assert chat_versions(str(gw.admin_url)) == {"v0", "v2"}
    [event] = [
        r for r in scan(catalog, "audit_log").to_pylist() if r["event_type"] == "stale_decision"
    ]
    details = json.loads(event["details"])
    assert (event["subject"], details["release_id"]) == ("v1", v1.release_id)
    assert details["current_release_id"] == v2.release_id and "nothing changed" in details["why"]
