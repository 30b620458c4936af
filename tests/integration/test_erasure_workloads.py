"""Erasure replacement per workload: when a workload's own stable version saw an erased user,
its replacement is that version's recipe (its workload's rows, from its base), released on
that workload's line as a run named for it; a workload candidate trained from it is aborted;
retirement touches only the versions that saw the user, and the other lines keep serving
what they served. Training and the release are stand-ins (the e2e erasure test runs them for
real); the cases, the routing state and the retirement are real."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prefect import flow
from prefect.runtime import flow_run

import flows.erasure as erasure_flow
import tasks.governance.replace_lines as replace_lines
from flows.release import ReleaseOptions
from infra.routing import RoutingState, StateChange, load_state, open_routing, scoped
from infra.runtime import Runtime
from tasks.governance.reach import load_case, new_case, now, role_of, save_case
from tasks.governance.replacement import ReplacementPlan, lines_reached, routed_versions
from tasks.release.machine.outcome import ReleaseOutcome

pytestmark = [pytest.mark.integration, pytest.mark.waits]  # mostly waits on the clock
RECEIPT = "ab" * 32
RUN_NAMES: list[str] = []  # the stand-in release's flow run names
OUTCOME = {"outcome": "promoted"}  # what the stand-in release ends with


def _state() -> RoutingState:
    """Shared v0; support serves its own v3 (saw the user); sql its own v4; router is in
    canary with v5, trained from v3."""
    state = RoutingState(stable="v0")
    changes = [
        StateChange(workload="support", stable="v3", phase="promoted"),
        StateChange(workload="sql", stable="v4", phase="promoted"),
        StateChange(workload="router", candidate="v5", phase="canary", weight=25),
    ]
    from infra.routing.state import apply_change

    for change in changes:
        state = apply_change(state, change)
    return state


def test_the_lines_an_erasure_reaches_are_those_serving_what_saw_the_user() -> None:
    state = _state()
    lines = lines_reached(state, {"v3", "v5"})
    assert sorted(lines, key=str) == ["router", "support"]  # shared v0 and sql v4 never saw it
    assert lines["support"].stable == "v3" and lines["router"].candidate == "v5"
    assert routed_versions(state) == {"v0", "v3", "v4", "v5"}
    assert role_of(state, "v3", bake_s=0, at=now()) == "stable"  # a workload's own stable
    assert role_of(state, "v5", bake_s=0, at=now()) == "candidate"


@flow(name="release")
def fake_release(version: str, options: ReleaseOptions | None = None) -> ReleaseOutcome:
    """Stand-in release: promotes ``version`` on the options' line, as the real one would."""
    opts = options or ReleaseOptions()
    rt = Runtime.from_env()
    line = scoped(open_routing(rt.settings, rt.store), opts.workload)
    RUN_NAMES.append(str(flow_run.name))
    if OUTCOME["outcome"] != "promoted":
        line.transition(StateChange(candidate=version, phase="rolled_back"))
        return ReleaseOutcome(version=version, workload=opts.workload, outcome="rolled_back")
    line.transition(StateChange(candidate=version, stable=version, phase="promoted"))
    return ReleaseOutcome(version=version, workload=opts.workload, outcome="promoted")


@pytest.fixture
def planted(prefect_api: None, flywheel_home: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The routing state above, an open case reaching v3 and v5, and stand-in training."""
    rt = Runtime.from_env()
    routing = open_routing(rt.settings, rt.store)
    for change in [
        StateChange(workload="support", stable="v3", phase="promoted"),
        StateChange(workload="sql", stable="v4", phase="promoted"),
        StateChange(workload="router", candidate="v5", phase="canary", weight=25),
    ]:
        routing.transition(change)
    reached = {"v3": ("lineage.json", "v1"), "v5": ("trained from v3", "v3")}
    case = new_case(
        receipt=RECEIPT,
        reached=reached,
        state=routing.load(),
        bake_s=0,
        deadline_days=7,
        stores={"tables": {"training_examples": 2}},
    )
    save_case(rt.store, case)
    seen: dict[str, Any] = {"plans": [], "releases": []}

    def plan(store: Any, catalog: Any, *, serving: str, cases: Any) -> ReplacementPlan:
        recipe = SimpleNamespace(method="dpo", workload="support", base_version="v1")
        seen["plans"].append(serving)
        return ReplacementPlan(serving=serving, base="v1", recipe=recipe, chain=[serving])  # type: ignore[arg-type]

    def train(rt: Any, plan: ReplacementPlan, max_steps: Any) -> str:
        return "v9"

    monkeypatch.setattr(replace_lines, "plan_replacement", plan)
    monkeypatch.setattr(replace_lines, "train_replacement", train)
    monkeypatch.setattr(erasure_flow, "release", fake_release)
    monkeypatch.setitem(OUTCOME, "outcome", "promoted")
    return seen


def test_a_workloads_replacement_is_released_on_its_line_and_retires_only_what_saw_the_user(
    planted: dict,
) -> None:
    assert load_case(Runtime.from_env().store, RECEIPT).status == "pending"
    out = erasure_flow.replace_erased()
    assert (out.status, out.replacements) == ("promoted", {"support": "v9"}), out
    assert planted["plans"] == ["v3"]  # support's own stable, not the shared v0
    assert out.retired == ["v3", "v5"]
    assert RUN_NAMES[-1] == "release-erasure-support-v9"
    state = load_state(Runtime.from_env().store)
    assert state.for_workload("support").stable == "v9"
    assert state.for_workload("sql").stable == "v4"  # another workload: untouched
    assert state.stable == "v0" and state.phase == "idle"  # the shared line: untouched
    router = state.for_workload("router")
    assert router.phase == "rolled_back" and router.stable == "v0"
    assert sorted(state.retired) == ["v3", "v5"]
    case = load_case(Runtime.from_env().store, RECEIPT)
    assert case.status == "done" and case.replacement == "v9"
    steps = [(s.step, s.detail) for s in case.steps]
    assert ("replacement promoted", "serves the support traffic") in steps


@pytest.fixture
def failed_on_support(planted: dict, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    """support's replacement v9 failed its gate on support's line; v0 and v2 are servable."""
    from infra.keys import model_prefix
    from infra.serving.models import COMPLETE

    rt = Runtime.from_env()
    for version in ("v0", "v2", "v9"):
        rt.store.put(model_prefix(version) + COMPLETE, b"")
    monkeypatch.setitem(OUTCOME, "outcome", "rolled_back")
    assert erasure_flow.replace_erased().status == "failed"
    assert load_case(rt.store, RECEIPT).failed_on == {"support": "v9"}
    return rt


def _resolved_events(rt: Runtime) -> list[dict[str, Any]]:
    import json

    from infra.catalog import scan

    events = scan(rt.catalog, "audit_log").to_pylist()
    return [json.loads(e["details"]) for e in events if e["event_type"] == "erasure.resolved"]


def test_resolving_without_the_workload_whose_line_failed_names_it_and_changes_nothing(
    failed_on_support: Runtime, capsys: pytest.CaptureFixture[str]
) -> None:
    from deployments.cli import main

    rt = failed_on_support
    before = load_state(rt.store)
    code = main(["erasure-resolve", RECEIPT, "--rollback", "--reason", "it regressed"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1, err
    assert "--workload support" in err[0] and "nothing changed" in err[0]
    after = load_state(rt.store)
    assert after.revision == before.revision and after.retired == before.retired
    assert load_case(rt.store, RECEIPT).status == "replacement_failed"
    assert _resolved_events(rt) == []


def test_rolling_back_a_workload_without_an_earlier_version_of_its_own_follows_the_shared(
    failed_on_support: Runtime, capsys: pytest.CaptureFixture[str]
) -> None:
    from deployments.cli import main

    rt = failed_on_support
    argv = ["erasure-resolve", RECEIPT, "--workload", "support", "--rollback"]
    assert main([*argv, "--reason", "v9 regressed", "--actor", "dpo"]) == 0
    out = capsys.readouterr().out
    assert "workload support rolls back to v0 (the shared stable version)" in out
    state = load_state(rt.store)
    assert state.for_workload("support").stable == "v0" and state.stable == "v0"
    assert state.for_workload("sql").stable == "v4"  # another workload: untouched
    assert sorted(state.retired) == ["v3", "v5"]  # saw the user, and no line serves them
    case = load_case(rt.store, RECEIPT)
    assert case.status == "done" and case.failed_on == {}
    [event] = _resolved_events(rt)
    assert (event["workload"], event["action"], event["stable"]) == ("support", "rollback", "v0")


def test_rolling_back_a_workload_returns_to_its_own_last_version_that_never_saw_the_user(
    failed_on_support: Runtime,
) -> None:
    from flows.erasure_resolve import erasure_resolve

    rt = failed_on_support
    routing = open_routing(rt.settings, rt.store)
    # support served its own v2 before v3 (v3 was promoted over it)
    history = StateChange(
        workload="support",
        stable="v3",
        candidate="v3",
        phase="promoted",
        evidence={"previous_stable": "v2"},
    )
    routing.transition(history)
    case = erasure_resolve(RECEIPT, "rollback", reason="v9 regressed", workload="support")
    state = load_state(rt.store)
    assert state.for_workload("support").stable == "v2"
    assert sorted(state.retired) == ["v3", "v5"] and case.status == "done"
    [done] = [s.detail for s in case.steps if s.step == "resolved: rollback"]
    assert "workload support rolls back to v2 (its own earlier version)" in done


def test_accepting_a_workloads_failed_replacement_makes_it_that_workloads_stable(
    failed_on_support: Runtime,
) -> None:
    from flows.erasure_resolve import erasure_resolve

    rt = failed_on_support
    case = erasure_resolve(RECEIPT, "accept", reason="small regression", workload="support")
    state = load_state(rt.store)
    support = state.for_workload("support")
    assert (support.stable, support.phase, support.candidate) == ("v9", "promoted", None)
    assert state.stable == "v0" and state.for_workload("sql").stable == "v4"
    assert sorted(state.retired) == ["v3", "v5"]
    assert case.status == "done" and case.replacement == "v9"
    [event] = _resolved_events(rt)
    assert (event["workload"], event["action"], event["stable"]) == ("support", "accept", "v9")


def test_a_workload_the_replacement_did_not_fail_on_is_refused(failed_on_support: Runtime) -> None:
    from flows.erasure_resolve import erasure_resolve
    from infra.errors import ControlRefused

    with pytest.raises(ControlRefused, match="workload support"):
        erasure_resolve(RECEIPT, "rollback", reason="wrong line", workload="sql")
    assert load_case(failed_on_support.store, RECEIPT).status == "replacement_failed"
