"""Erasure reaching the models (issue 29), end to end on the embedded defaults: a user's
traces train v1, v1 is stable; ``forget-user`` records v1 as reached; the next weekly run
trains v2 on v1's recipe without the user's rows, releases it through a running gateway
(gate -> canary -> promoted) and retires v1, which no release control, no routing change and
no request by name (the gateway answers 404) will touch again; ``erasure-status`` shows every
step and the deadline gauge is back at 0. And when the replacement fails the gate: the alert fires, nothing is retired until a person
rolls back (to the newest version that never saw the user), audited with the receipt.

The versions are trained for real (a tiny untrained GPT-2, two steps); their answers at the
gate and in the canary come from fake upstreams whose accuracy each test sets."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from infra.catalog import append_rows, open_catalog, scan
from infra.gateway.parts import Intervals
from infra.routing import (
    RoutingState,
    StateChange,
    apply_change,
    load_state,
    record_transition,
    save_state,
)
from infra.settings import get_settings
from infra.store import open_store
from tests.fakes.upstream import FakeUpstreamHandle, start_fake_upstream
from tests.integration.test_release_flow import Traffic, answerer
from tests.integration.test_train_flow import (  # noqa: F401 - fixtures used by name
    _rows_for,
    tiny_home,
    untrained_model,
)
from tests.unit.test_monitoring_alerts import check_alert, series

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TOKEN = "e2e-admin-token-0123456789abcdef0123"
W1 = "2026-03-04T09:00:00Z"


@pytest.fixture
def forgotten(
    request: pytest.FixtureRequest,
    tiny_home: Path,  # noqa: F811 - the fixture imported above
    prefect_api: None,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[str, dict[str, FakeUpstreamHandle]]]:
    """alice's and bob's traces train v1, v1 is promoted, then alice is forgotten; yields the
    receipt and the fake upstreams (v2's accuracy is the test's parameter; None: v1 is never
    promoted)."""
    accuracy = {"v0": 0.5, "v1": 0.5, "v2": request.param or 0.5}
    handles = {v: start_fake_upstream(v, answer=answerer(a)) for v, a in accuracy.items()}
    try:
        yield _forget_alice(handles, monkeypatch, promote=request.param is not None), handles
    finally:
        for handle in handles.values():
            handle.stop()


def _forget_alice(
    handles: dict[str, FakeUpstreamHandle], monkeypatch: pytest.MonkeyPatch, *, promote: bool
) -> str:
    from flows.governance import forget_user_id
    from flows.train import train

    env = {
        "FLYWHEEL_TRAIN__MIN_PAIRS": "4",
        "FLYWHEEL_TRAIN__BUFFER_DAYS": "0",
        "FLYWHEEL_TRAIN__BUFFER_WINDOWS": "1",
        "FLYWHEEL_GATEWAY__UPSTREAMS": json.dumps({v: h.url for v, h in handles.items()}),
        "FLYWHEEL_GATEWAY__DIVERSE_FRACTION": "0",
        "FLYWHEEL_GATEWAY__ADMIN_TOKEN": TOKEN,
        "FLYWHEEL_RELEASE__SHADOW_FRACTION": "0",
        "FLYWHEEL_RELEASE__CANARY_STEPS": "[50, 100]",
        "FLYWHEEL_RELEASE__ANALYSIS_INTERVAL_S": "2",
        "FLYWHEEL_RELEASE__STEP_DEADLINE_S": "30",
        "FLYWHEEL_RELEASE__MIN_REQUESTS_PER_STEP": "5",
        "FLYWHEEL_RELEASE__PII_LEAK_CHECK": "false",
        # both versions are fake upstreams in this process, beside other test workers on two
        # cores: a scheduling burst on a few candidate requests read as p99 2.93x stable's (3
        # of 49 over 100 ms) and rolled the replacement back. Only a candidate five times
        # slower fails here; the rail's own tests are tests/unit/test_release_latency.py and
        # the serial vLLM test's
        "FLYWHEEL_RELEASE__LATENCY_P99_RATIO_MAX": "5",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    settings = get_settings()
    store, catalog = open_store(settings), open_catalog(settings)
    append_rows(
        catalog, "training_examples", _rows_for({"alice": 3, "bob": 5}, W1, settings.salt())
    )
    assert train(method="dpo", max_steps=2).version == "v1"
    promoted = record_transition(
        RoutingState(stable="v0"),
        to_phase="promoted",
        actor="test",
        reason="v1 promoted",
        evidence={"previous_stable": "v0"},
        stable="v1",
    )
    promoted.history[-1].candidate = "v1"
    save_state(store, promoted if promote else RoutingState(stable="v0"))

    erasure = forget_user_id("alice")
    assert erasure.found
    return erasure.receipt


def gauges(store: Any) -> dict[str, float]:
    """The erasure gauges as last published (metrics/erasure.json)."""
    state = json.loads(store.get("metrics/erasure.json"))
    return {name: max(series.values()) for name, series in state["gauges"].items()}


def status_text(receipt: str, capsys: pytest.CaptureFixture[str]) -> str:
    from deployments import cli

    assert cli.main(["erasure-status", receipt]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("forgotten", [0.95], indirect=True)
def test_weekly_run_replaces_and_retires_the_version_that_saw_the_user(
    forgotten: tuple[str, dict[str, FakeUpstreamHandle]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from deployments import cli
    from deployments.erasure_commands import models_fields
    from flows.release import release
    from flows.weekly import weekly
    from infra.errors import ControlRefused, RejectedVersion
    from infra.gateway.serve import start_background_gateway

    receipt, _ = forgotten
    settings = get_settings()
    store = open_store(settings)
    before = status_text(receipt, capsys)
    assert "stable when requested" in before and "pending" in before
    said = models_fields(receipt)  # what `flywheel forget-user` adds to its summary
    assert said["models"] == {"v1": "stable"} and said["models_status"].startswith("pending")
    assert gauges(store)["flywheel_erasure_oldest_pending_seconds"] > 0

    with start_background_gateway(
        settings, port=0, intervals=Intervals(state_s=0.1, flush_s=0.2)
    ) as gw:
        monkeypatch.setenv("FLYWHEEL_GATEWAY__URL", gw.url)
        monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_URL", gw.admin_url)
        get_settings.cache_clear()
        traffic = Traffic(gw.url)
        thread = threading.Thread(target=traffic.run, daemon=True)
        thread.start()
        try:
            out = weekly()
        finally:
            traffic.stop.set()
            thread.join(10)
        assert set(traffic.statuses) == {200}, traffic.statuses  # users saw no failure
        body = {"model": "v1", "messages": [{"role": "user", "content": "What is 2 + 3?"}]}
        by_name = httpx.post(  # not even the admin may call a retired version by name
            f"{gw.admin_url}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert by_name.status_code == 404, by_name.text
        body["model"] = "v2"
        assert httpx.post(f"{gw.url}/v1/chat/completions", json=body, timeout=10).status_code == 200

    done = out["erasure"]
    assert (done.status, done.version, done.retired) == ("promoted", "v2", ["v1"]), done
    assert out["train"] is None  # this week's training was the replacement
    state = load_state(store)
    assert (state.stable, state.retired) == ("v2", ["v1"])
    trained = json.loads(store.get("models/v2/lineage.json"))["data"]["training_examples"]
    assert trained["trace_ids"] and all(t.startswith("bob-") for t in trained["trace_ids"])
    card = yaml.safe_load(store.get("models/v2/model_card.yaml"))
    assert card["erasure"]["honours_receipts"] == [receipt] and card["erasure"]["replaces"] == "v1"
    assert "alice" not in store.get("models/v2/model_card.yaml").decode()
    assert yaml.safe_load(store.get("models/v1/model_card.yaml"))["retired"]["replaced_by"] == "v2"

    # v1 is never released, promoted or routed again, not even forced
    monkeypatch.delenv("FLYWHEEL_GATEWAY__URL")  # the gateway is gone: the store's state again
    monkeypatch.delenv("FLYWHEEL_GATEWAY__ADMIN_URL")
    get_settings.cache_clear()
    with pytest.raises(ControlRefused, match="v1 is retired"):
        release("v1")
    assert cli.main(["release", "v1", "--force"]) == 2
    assert "v1 is retired" in capsys.readouterr().err
    with pytest.raises(RejectedVersion, match="retired"):
        apply_change(state, StateChange(candidate="v1", weight=10, force=True))
    assert cli.main(["status"]) == 0 and "retired" in capsys.readouterr().out

    text = status_text(receipt, capsys)
    for step in ("erased", "reached", "replacement planned", "replacement trained"):
        assert step in text, step
    assert "replacement promoted" in text and "retired" in text
    assert re.search(r"^\s+status\s+done \(deadline", text, re.M), text
    assert "langfuse" in text and "not used" in text
    assert gauges(store)["flywheel_erasure_oldest_pending_seconds"] == 0
    events = scan(open_catalog(settings), "audit_log").to_pylist()
    assert any(e["event_type"] == "erasure.retired" and e["subject"] == receipt for e in events)


@pytest.mark.parametrize("forgotten", [0.1], indirect=True)
def test_a_replacement_that_fails_the_gate_alerts_and_retires_nothing_until_a_person_chooses(
    forgotten: tuple[str, dict[str, FakeUpstreamHandle]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    from flows.erasure import replace_erased
    from flows.erasure_resolve import erasure_resolve

    receipt, _ = forgotten
    settings = get_settings()
    store = open_store(settings)

    out = replace_erased()

    assert (out.status, out.version, out.outcome) == ("failed", "v2", "rolled_back"), out
    state = load_state(store)
    assert (state.stable, state.retired) == ("v1", [])  # nothing retired silently
    published = gauges(store)
    assert published["flywheel_erasure_replacement_failed"] == 1
    pushed = [
        series(name, f"{value}x10", job="flywheel", stage="erasure")
        for name, value in published.items()
        if name.startswith("flywheel_erasure_")
    ]
    check_alert((pushed, "ErasureReplacementFailed", "2m", [{"severity": "critical"}]), tmp_path)
    text = status_text(receipt, capsys)
    assert "replacement_failed" in text and "erasure-resolve" in text

    case = erasure_resolve(receipt, "rollback", reason="v2 regressed at the gate", actor="dpo")

    state = load_state(store)
    assert (state.stable, state.retired) == ("v0", ["v1"])  # v0 never saw alice
    assert case.status == "done" and case.versions["v1"].status == "retired"
    events = scan(open_catalog(settings), "audit_log").to_pylist()
    resolved = [e for e in events if e["event_type"] == "erasure.resolved"]
    assert [(e["subject"], e["actor"]) for e in resolved] == [(receipt, "dpo")]
    assert json.loads(resolved[0]["details"])["action"] == "rollback"
    assert "resolved: rollback" in status_text(receipt, capsys)
    assert gauges(store)["flywheel_erasure_oldest_pending_seconds"] == 0
    assert gauges(store)["flywheel_erasure_replacement_failed"] == 0


@pytest.mark.parametrize("forgotten", [None], indirect=True)
def test_a_version_that_saw_the_user_but_never_served_is_retired_at_once(
    forgotten: tuple[str, dict[str, FakeUpstreamHandle]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from flows.erasure import replace_erased

    receipt, _ = forgotten
    store = open_store(get_settings())
    state = load_state(store)
    assert (state.stable, state.retired) == ("v0", ["v1"])
    text = status_text(receipt, capsys)
    assert "archived when requested" in text and "now retired" in text
    assert re.search(r"^\s+status\s+done \(deadline", text, re.M), text
    assert gauges(store)["flywheel_erasure_oldest_pending_seconds"] == 0
    assert replace_erased().status == "none"  # nothing for the weekly run to replace
