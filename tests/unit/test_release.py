"""The release state machine, human controls, and the gate's effect on routing (local routing,
no services)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.errors import RejectedVersion, ReleaseError, ReleaseInterrupted
from infra.routing import RoutingState, StoreRouting, save_state
from infra.serving.models import ServableVersions
from infra.settings import ReleaseSettings
from infra.store import LocalStore
from tasks.release.gate.gate import Decision
from tasks.release.gate.report import gate_evidence
from tasks.release.machine import controls, machine, transitions
from tests.helpers import gate_result

CFG = ReleaseSettings(canary_steps=(5, 25, 50, 100), shadow_fraction=0.2)


@pytest.fixture
def routing(tmp_path: Path) -> StoreRouting:
    s = LocalStore(tmp_path / "store")
    save_state(s, RoutingState(stable="v0"))
    return StoreRouting(s)


BETTER = ([0.0, 1.0] * 30, [1.0] * 60)
WORSE = ([1.0] * 60, [0.0, 1.0] * 30)
SAME = ([0.0, 1.0] * 30, [0.0, 1.0] * 30)


def servable(routing: StoreRouting) -> ServableVersions:
    return ServableVersions(routing.store, frozenset({"v0", "v1", "v2"}))


def start(routing: StoreRouting, version: str = "v1") -> RoutingState:
    return transitions.begin_release(routing, None, version, actor="test")


def gated(
    routing: StoreRouting, version: str, scores: tuple[list[float], list[float]], **kw: Any
) -> RoutingState:
    """``apply_gate`` on a gate result and its evidence, as the release flow hands them."""
    result = gate_result(version, *scores)
    return machine.apply_gate(routing, None, result, gate=gate_evidence(result, {}), **kw)


def test_gate_pass_starts_the_shadow_with_the_gate_as_evidence(routing: StoreRouting) -> None:
    assert start(routing).phase == "gating"
    result = gate_result("v1", *BETTER)
    assert result.decision == Decision.PROCEED
    state = machine.apply_gate(
        routing,
        None,
        result,
        gate=gate_evidence(result, {"json": "gates/v1/report.json"}),
        policy=CFG,
        actor="test",
    )
    assert (state.phase, state.candidate, state.shadow_fraction, state.weight) == (
        "shadow",
        "v1",
        0.2,
        0.0,
    )
    evidence = state.history[-1].evidence["gate"]
    assert evidence["decision"] == "PROCEED_TO_SHADOW" and evidence["p_value"] < 0.05
    assert evidence["report"] == "gates/v1/report.json"


def test_gate_rejection_is_recorded_and_never_released_again(routing: StoreRouting) -> None:
    start(routing)
    state = gated(routing, "v1", WORSE, policy=CFG, actor="test")
    assert state.phase == "rolled_back" and state.candidate is None and "v1" in state.rejected
    assert machine.plan_release(state, "v1") == "rejected"
    with pytest.raises(RejectedVersion):
        start(routing)
    forced = transitions.begin_release(routing, None, "v1", actor="person", force=True)
    assert forced.phase == "gating" and "v1" not in forced.rejected
    assert "forced" in forced.history[-1].evidence


def test_inconclusive_gate_holds_for_a_person_who_can_resume(routing: StoreRouting) -> None:
    start(routing)
    held = gated(routing, "v1", SAME, policy=CFG, actor="test")
    assert (held.phase, held.weight, held.shadow_fraction) == ("held", 0.0, 0.0)
    assert machine.plan_release(held, "v1") == "held"
    resumed = controls.resume(routing, None, actor="person")
    assert (resumed.phase, resumed.shadow_fraction) == ("shadow", 0.2)  # mirroring again


def test_pause_keeps_traffic_and_resume_returns_to_the_same_step(routing: StoreRouting) -> None:
    start(routing)
    transitions.canary_move(routing, None, "v1", step=2, policy=CFG, actor="test").or_raise()
    paused = controls.pause(routing, None, actor="person", reason="looking at dashboards")
    assert (paused.phase, paused.weight, paused.step) == ("held", 50.0, 2)
    resumed = controls.resume(routing, None, actor="person")
    assert (resumed.phase, resumed.weight, resumed.step) == ("canary", 50.0, 2)
    with pytest.raises(ReleaseError):
        controls.resume(routing, None, actor="person")


def test_promote_makes_the_candidate_stable(routing: StoreRouting) -> None:
    start(routing)
    gated(routing, "v1", BETTER, policy=CFG, actor="test")
    transitions.canary_move(routing, None, "v1", step=1, policy=CFG, actor="test").or_raise()
    state = controls.promote(routing, None, actor="person", versions=servable(routing))
    assert (state.stable, state.candidate, state.phase, state.weight) == ("v1", None, "promoted", 0)
    assert state.history[-1].candidate == "v1"
    with pytest.raises(ReleaseError):
        controls.promote(routing, None, actor="person", versions=servable(routing))


def test_abort_takes_all_traffic_away_and_rejects(routing: StoreRouting) -> None:
    start(routing)
    transitions.canary_move(routing, None, "v1", step=3, policy=CFG, actor="test").or_raise()
    state = controls.abort(routing, None, actor="person", reason="bad smell")
    assert (state.phase, state.weight, state.candidate) == ("rolled_back", 0.0, None)
    assert state.rejected == ["v1"] and "aborted: bad smell" in state.history[-1].reason
    assert controls.abort(routing, None, actor="person").revision == state.revision  # idempotent


def test_a_release_never_overwrites_a_rollback_written_meanwhile(routing: StoreRouting) -> None:
    start(routing)
    transitions.canary_move(routing, None, "v1", step=0, policy=CFG, actor="test").or_raise()
    routing.rollback(reason="alert", actor="alertmanager")
    with pytest.raises(ReleaseInterrupted):
        transitions.canary_move(routing, None, "v1", step=1, policy=CFG, actor="test").or_raise()
    assert routing.load().phase == "rolled_back"


def test_another_release_in_flight_must_be_ended_first(routing: StoreRouting) -> None:
    start(routing, "v1")
    transitions.canary_move(routing, None, "v1", step=0, policy=CFG, actor="test").or_raise()
    with pytest.raises(ReleaseError, match="abort or promote it first"):
        start(routing, "v2")
    with pytest.raises(ReleaseError, match="already the stable"):
        start(routing, "v0")


def test_a_held_candidate_without_traffic_is_superseded(routing: StoreRouting) -> None:
    start(routing, "v1")
    gated(routing, "v1", SAME, policy=CFG, actor="t")
    state = start(routing, "v2")
    assert state.candidate == "v2" and state.history[-1].evidence["superseded"] == "v1"


def test_status_summarises_the_state(routing: StoreRouting) -> None:
    start(routing)
    status = controls.release_status(routing)
    assert status["candidate"] == "v1" and status["phase"] == "gating"
    assert status["last_transition"]["reason"] == "release started: golden gate"


def test_skip_shadow_goes_to_the_first_canary_step(routing: StoreRouting) -> None:
    start(routing)
    state = gated(routing, "v1", BETTER, policy=CFG, actor="t", skip_shadow=True)
    assert (state.phase, state.step, state.weight) == ("canary", 0, 5.0)


def test_config_from_settings_and_overrides() -> None:
    from flows.release import ReleaseOptions

    opts = ReleaseOptions(canary_steps=[50, 100], analysis_interval_s=2, step_deadline_s=None)
    cfg = opts.policy(ReleaseSettings())
    assert cfg.canary_steps == (50, 100) and cfg.step_deadline_s == 1800.0
    assert cfg.poll_s == 0.5  # polls several times per analysis interval
    assert ReleaseSettings().kl_max == 1.0


def test_a_step_held_for_lack_of_data_gets_its_traffic_back_on_resume(
    routing: StoreRouting,
) -> None:
    from tasks.release.canary.rollout import PhaseResult

    start(routing)
    transitions.canary_move(routing, None, "v1", step=1, policy=CFG, actor="test").or_raise()
    held = machine.conclude(
        routing,
        None,
        "v1",
        at=machine.Step("canary", index=1),
        policy=CFG,
        actor="test",
        result=PhaseResult(verdict="no_data", reasons=["3 candidate requests < 50 required"]),
    )
    assert (held.phase, held.weight, held.rejected) == ("held", 0.0, [])
    assert "no data" in held.history[-1].reason
    resumed = controls.resume(routing, None, actor="person")
    assert (resumed.phase, resumed.step, resumed.weight) == ("canary", 1, 25.0)


def test_a_failed_step_rolls_back_with_its_evidence(routing: StoreRouting) -> None:
    from tasks.release.canary.rollout import PhaseResult

    start(routing)
    transitions.canary_move(routing, None, "v1", step=0, policy=CFG, actor="test").or_raise()
    result = PhaseResult(
        verdict="fail", reasons=["error ratio 9.00% = 9.00x stable 1.00%"], evidence={"source": "x"}
    )
    state = machine.conclude(
        routing, None, "v1", at=machine.Step("canary"), result=result, policy=CFG, actor="t"
    )
    assert (state.phase, state.rejected) == ("rolled_back", ["v1"])
    assert state.history[-1].evidence["canary"]["source"] == "x"


def test_pause_is_for_shadow_and_canary_and_promote_checks_the_version(
    routing: StoreRouting,
) -> None:
    start(routing)
    with pytest.raises(ReleaseError, match="to pause"):
        controls.pause(routing, None, actor="person")
    with pytest.raises(ReleaseInterrupted):
        controls.promote(routing, None, actor="flow", version="v7", versions=servable(routing))


def test_next_step_follows_the_state_and_stops_when_interrupted() -> None:
    gating = RoutingState(stable="v0", candidate="v1", phase="gating")
    canary = RoutingState(stable="v0", candidate="v1", phase="canary", weight=25, step=1)
    rolled_back = RoutingState(stable="v0", phase="rolled_back", rejected=["v1"])
    assert machine.next_step(RoutingState(stable="v0"), "v1", last=None) == machine.Step("gate")
    assert machine.next_step(canary, "v1", last=None) == machine.Step("canary", index=1)
    assert machine.next_step(canary, "v1", last="pass") == machine.Step("canary", index=1)
    assert machine.next_step(gating, "v1", last="MANUAL_REVIEW") is None
    assert machine.next_step(rolled_back, "v1", last="fail") is None
    assert machine.next_step(rolled_back, "v1", last=None) is None  # rejected: no new gate
    # resumed by release-control, which drives the release now: this run ends
    assert machine.next_step(canary, "v1", last="interrupted") is None
