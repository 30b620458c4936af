"""Admin API: bearer token, manual rollback, routing updates, and the Alertmanager webhook
rolling a candidate back in under a second (state + audit event in a real SQLite Iceberg
catalog), deduplicated, and independent of Prefect being reachable."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from infra.catalog import get_table, open_catalog, scan
from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.admin import trigger_prefect_rollback
from infra.gateway.parts import Intervals
from infra.routing import RoutingState, load_state, save_state
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from tests.fakes.loopback import post_many
from tests.fakes.upstream import EchoUpstream

pytestmark = pytest.mark.integration

TOKEN = "s3cret-token-for-the-admin-api-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def settings_for(tmp_path: Path, token: str | None = TOKEN) -> Settings:
    return Settings(
        home=tmp_path,
        gateway=GatewaySettings(
            admin_token=SecretStr(token) if token else None, diverse_fraction=0
        ),
    )


def start(tmp_path: Path, state: RoutingState | None = None, **kw: Any) -> GatewayHandle:
    # the test reads the audit log too: create the catalog first rather than race the gateway
    get_table(open_catalog(settings_for(tmp_path)), "audit_log")
    store = LocalStore(tmp_path / "store")
    if state is not None:
        save_state(store, state)
    settings = kw.pop("settings", None) or settings_for(tmp_path)
    upstreams = {v: EchoUpstream(v) for v in ("v0", "v1", "v2")}
    return start_background_gateway(
        settings, port=0, store=store, upstreams=upstreams, intervals=Intervals(state_s=0.1), **kw
    )


def webhook(model: str, fingerprint: str, status: str = "firing") -> dict[str, Any]:
    """Alertmanager's webhook payload (version 4), as its webhook receiver posts it."""
    alert = {
        "status": status,
        "labels": {"alertname": "CandidateModelRegression", "model": model, "severity": "critical"},
        "annotations": {"summary": f"error ratio of {model} above 1.5x stable"},
        "startsAt": "2026-01-01T00:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph",
        "fingerprint": fingerprint,
    }
    return {
        "version": "4",
        "groupKey": '{}:{alertname="CandidateModelRegression"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "flywheel-gateway",
        "groupLabels": {"alertname": "CandidateModelRegression"},
        "commonLabels": alert["labels"],
        "commonAnnotations": alert["annotations"],
        "externalURL": "http://alertmanager:9093",
        "alerts": [alert],
    }


def rollback_events(tmp_path: Path, want: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    catalog = open_catalog(settings_for(tmp_path))
    deadline = time.monotonic() + timeout
    while True:
        rows = [r for r in scan(catalog, "audit_log").to_pylist() if r["event_type"] == "rollback"]
        if len(rows) >= want or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def canary_state() -> RoutingState:
    return RoutingState(candidate="v1", phase="canary", weight=25, shadow_fraction=0.1, step=1)


def test_firing_alert_rolls_back_at_once_and_once(tmp_path: Path, monkeypatch) -> None:
    """The webhook's answer comes once the rollback is stored (no canary step or poll waited
    for); the same alert again changes nothing."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with start(tmp_path, canary_state()) as gw:
        resp = httpx.post(f"{gw.admin_url}/admin/alerts", json=webhook("v1", "fp-1"), headers=AUTH)
        assert resp.status_code == 200 and resp.json()["rolled_back"] is True
        stored = load_state(LocalStore(tmp_path / "store"))
        assert (stored.weight, stored.shadow_fraction, stored.phase) == (0, 0, "rolled_back")
        assert stored.candidate is None and stored.rejected == ["v1"]
        users = [f"user-{i}" for i in range(200)]
        bodies = [{"messages": [{"role": "user", "content": "hi"}], "user": u} for u in users]
        replies = asyncio.run(
            post_many(str(gw.admin_url), "/v1/chat/completions", bodies, headers=AUTH)
        )
        assert {r.headers["x-flywheel-model"] for r in replies} == {"v0"}  # the admin sees it
        [event] = rollback_events(tmp_path, 1)
        again = httpx.post(f"{gw.admin_url}/admin/alerts", json=webhook("v1", "fp-1"), headers=AUTH)
        assert again.json()["rolled_back"] is False and again.json()["duplicates"] == 1
        time.sleep(1.0)
        assert len(rollback_events(tmp_path, 2, timeout=0)) == 1  # no duplicate event
    details = json.loads(event["details"])
    assert (event["actor"], event["subject"]) == ("alertmanager", "v1")
    assert details["evidence"]["alerts"][0]["fingerprint"] == "fp-1"
    assert "CandidateModelRegression" in details["reason"] and details["weight_before"] == 25
    history = load_state(LocalStore(tmp_path / "store")).history
    assert [h.to_phase for h in history] == ["rolled_back"]


def test_alerts_not_naming_the_candidate_change_nothing(tmp_path: Path) -> None:
    with start(tmp_path, canary_state()) as gw:
        for payload in (webhook("v0", "fp-a"), webhook("v1", "fp-b", status="resolved")):
            resp = httpx.post(f"{gw.admin_url}/admin/alerts", json=payload, headers=AUTH)
            assert resp.status_code == 200 and resp.json()["rolled_back"] is False
        assert httpx.get(f"{gw.admin_url}/admin/state", headers=AUTH).json()["weight"] == 25
        bad = httpx.post(f"{gw.admin_url}/admin/alerts", json={"status": "firing"}, headers=AUTH)
        assert bad.status_code == 400


def test_rollback_does_not_wait_for_an_unreachable_prefect(tmp_path: Path) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/api"
    settings = settings_for(tmp_path)
    asked, answered = threading.Event(), threading.Event()

    def ask_dead_prefect(reason: str, **release: str) -> None:
        asked.set()
        answered.wait(30)  # held until the webhook has its answer: a rollback that waited
        # for Prefect would never answer (the client below gives up after 10 s)
        with temporary_settings(updates={PREFECT_API_URL: dead}):
            trigger_prefect_rollback(settings, reason, **release)  # retries, fails: logged only

    with start(tmp_path, canary_state(), on_rollback=ask_dead_prefect) as gw:
        try:
            resp = httpx.post(
                f"{gw.admin_url}/admin/alerts", json=webhook("v1", "fp-2"), headers=AUTH, timeout=10
            )
        finally:
            answered.set()
        assert resp.json()["rolled_back"] is True
        assert load_state(LocalStore(tmp_path / "store")).weight == 0
        assert asked.wait(10)
        assert len(rollback_events(tmp_path, 1)) == 1


def test_a_gateway_stopped_right_after_a_rollback_finishes_its_background_steps(
    tmp_path: Path,
) -> None:
    done = threading.Event()

    def slow_prefect(reason: str, **release: str) -> None:
        time.sleep(1.5)  # a Prefect API that takes its time
        done.set()

    with start(tmp_path, canary_state(), on_rollback=slow_prefect) as gw:
        resp = httpx.post(f"{gw.admin_url}/admin/rollback", json={"reason": "x"}, headers=AUTH)
        assert resp.json()["rolled_back"] is True
    assert done.is_set()  # stopped at once: its daemon thread was not dropped mid-request
    assert len(rollback_events(tmp_path, 1)) == 1


def test_rollback_asks_prefect_to_run_the_rollback_deployment(tmp_path: Path, prefect_api) -> None:
    from prefect import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("rollback")
        deployment_id = client.create_deployment(flow_id=flow_id, name="rollback")
        release = canary_state().model_copy(update={"release_id": "v1-0123abcd"})
        with start(tmp_path, release) as gw:
            resp = httpx.post(
                f"{gw.admin_url}/admin/rollback", json={"reason": "drill"}, headers=AUTH
            )
            assert resp.json()["rolled_back"] is True
            only_ours = DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
            deadline = time.monotonic() + 60
            while not (runs := client.read_flow_runs(deployment_filter=only_ours)):
                assert time.monotonic() < deadline, "no rollback flow run was requested"
                time.sleep(0.2)
    # the run names the release it rolls back: started late, it leaves the next one alone
    assert [r.parameters for r in runs] == [
        {"reason": "drill", "version": "v1", "release_id": "v1-0123abcd"}
    ]


def test_rollback_without_the_deployment_says_so_in_one_warning(
    tmp_path: Path, prefect_api, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path).model_copy(
        update={"prefect_rollback_deployment": "rollback/not-deployed-here"}
    )
    with caplog.at_level(logging.WARNING, logger="infra.gateway.admin"):
        trigger_prefect_rollback(settings, "drill")  # no exception: the state is rolled back
    # this call's records: a gateway of an earlier test may still log from its own threads
    ours = threading.get_ident()
    [record] = [r for r in caplog.records if r.name == "infra.gateway.admin" and r.thread == ours]
    assert record.levelname == "WARNING" and "flywheel deploy" in record.getMessage()


def test_admin_api_refuses_without_the_token(tmp_path: Path) -> None:
    with start(tmp_path, canary_state()) as gw:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            assert httpx.get(f"{gw.admin_url}/admin/state", headers=headers).status_code == 401
            resp = httpx.post(
                f"{gw.admin_url}/admin/alerts", json=webhook("v1", "x"), headers=headers
            )
            assert resp.status_code == 401
        assert httpx.post(f"{gw.admin_url}/admin/rollback", json={}, headers={}).status_code == 401
        assert httpx.get(f"{gw.admin_url}/admin/state", headers=AUTH).json()["weight"] == 25


def test_admin_api_is_off_without_a_configured_token(tmp_path: Path) -> None:
    with start(tmp_path, canary_state(), settings=settings_for(tmp_path, token=None)) as gw:
        resp = httpx.get(f"{gw.url}/admin/state", headers=AUTH)
        assert resp.status_code == 503 and "FLYWHEEL_GATEWAY__ADMIN_TOKEN" in resp.text


def test_state_updates_and_manual_rollback(tmp_path: Path) -> None:
    with start(tmp_path, RoutingState(rejected=["v2"])) as gw:
        update = {"candidate": "v1", "phase": "canary", "weight": 100, "reason": "step 4"}
        resp = httpx.post(f"{gw.admin_url}/admin/state", json=update, headers=AUTH)
        assert resp.status_code == 200 and resp.json()["revision"] == 2
        reply = httpx.post(
            f"{gw.admin_url}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "q"}]},
            headers=AUTH,  # only an answer to the admin names its version
        )
        assert reply.headers["x-flywheel-model"] == "v1"  # in effect at once
        stale = httpx.post(
            f"{gw.admin_url}/admin/state", json={"weight": 5, "expected_revision": 1}, headers=AUTH
        )
        assert stale.status_code == 409
        rejected = httpx.post(f"{gw.admin_url}/admin/state", json={"candidate": "v2"}, headers=AUTH)
        assert rejected.status_code == 409 and "rejected" in rejected.text
        first = httpx.post(
            f"{gw.admin_url}/admin/rollback", json={"reason": "bad answers"}, headers=AUTH
        )
        second = httpx.post(
            f"{gw.admin_url}/admin/rollback", json={"reason": "again"}, headers=AUTH
        )
        assert first.json()["rolled_back"] is True and second.json()["rolled_back"] is False
        assert first.json()["state"]["rejected"] == ["v2", "v1"]
    assert [e["details"] for e in rollback_events(tmp_path, 1)][0].count("bad answers") == 1


def test_every_release_transition_goes_through_the_admin_api(tmp_path: Path) -> None:
    """The state machine over :class:`GatewayRouting`: a forced release of a rejected version
    (``rejected`` is rewritten), a canary step in effect at once, a stale compare-and-swap
    refused, and the promotion recorded under the released version (``subject``)."""
    from infra.errors import RejectedVersion, StateConflict
    from infra.gateway.cohorts import bucket
    from infra.gateway.requester import key_of, routing_secret, tenant_of
    from infra.routing import GatewayRouting, StateChange
    from infra.serving.models import ServableVersions
    from infra.settings import ReleaseSettings
    from tasks.release.machine import controls, transitions

    policy = ReleaseSettings(canary_steps=(100,))
    with start(tmp_path, RoutingState(rejected=["v1"])) as gw:
        routing = GatewayRouting(gw.admin_url, TOKEN)
        with pytest.raises(RejectedVersion):
            routing.transition(StateChange(candidate="v1", weight=5, actor="t", reason="r"))
        gating = transitions.begin_release(routing, None, "v1", actor="person", force=True)
        assert (gating.phase, gating.candidate, gating.rejected) == ("gating", "v1", [])
        canary = transitions.canary_move(
            routing, None, "v1", step=0, policy=policy, actor="t"
        ).or_raise()
        # the last step leaves stable its holdback (10 %): a user in the candidate's buckets,
        # keyed with the deployment's secret (an anonymous client is in the holdback one time
        # in ten)
        secret = routing_secret(settings_for(tmp_path).salt())
        admin = tenant_of(AUTH["Authorization"])  # its user under the admin token's API key
        user = next(
            f"u{i}"
            for i in range(100)
            if bucket(key_of(user=f"u{i}", tenant=admin) or "", salt="v1", secret=secret) < 8_000
        )
        reply = httpx.post(
            f"{gw.admin_url}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "q"}], "user": user},
            headers=AUTH,  # only an answer to the admin names its version
        )
        assert canary.weight == 90.0
        assert reply.headers["x-flywheel-model"] == "v1"  # in effect at once
        stale = StateChange(weight=5, expected_revision=gating.revision, actor="t", reason="r")
        with pytest.raises(StateConflict):
            routing.transition(stale)
        served = ServableVersions(LocalStore(tmp_path / "store"), frozenset(("v0", "v1", "v2")))
        promoted = controls.promote(
            routing,
            None,
            actor="person",
            version="v1",
            versions=served,
            force=True,  # no gate ran in this test
            reason="drill",
        )
        assert (promoted.stable, promoted.candidate, promoted.weight) == ("v1", None, 0.0)
        assert promoted.history[-1].candidate == "v1" and promoted.revision == canary.revision + 1
        assert routing.load() == promoted
    stored = load_state(LocalStore(tmp_path / "store"))
    assert stored == promoted
    assert [h.to_phase for h in stored.history] == ["gating", "canary", "promoted"]
