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
from flows.release import ReleaseOptions, ReleaseOutcome
from infra.routing import RoutingState, StateChange, load_state, open_routing, scoped
from infra.runtime import Runtime
from tasks.governance.reach import load_case, new_case, now, role_of, save_case
from tasks.governance.replacement import ReplacementPlan, lines_reached, routed_versions

pytestmark = pytest.mark.integration
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

    def train(rt: Any, plan: ReplacementPlan, cases: Any, max_steps: Any) -> str:
        return "v9"

    monkeypatch.setattr(erasure_flow, "plan_replacement", plan)
    monkeypatch.setattr(erasure_flow, "_train", train)
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


def test_resolving_a_failed_workload_replacement_does_not_retire_what_that_workload_serves(
    planted: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.erasure import erasure_resolve
    from infra.keys import model_prefix
    from infra.models import COMPLETE

    rt = Runtime.from_env()
    rt.store.put(model_prefix("v0") + COMPLETE, b"")  # the shared stable is servable
    monkeypatch.setitem(OUTCOME, "outcome", "rolled_back")
    assert erasure_flow.replace_erased().status == "failed"
    case = erasure_resolve(RECEIPT, "rollback", reason="replacement regressed")
    state = load_state(rt.store)
    assert state.for_workload("support").stable == "v3"  # still served: not retired under it
    assert state.retired == ["v5"] and case.status == "pending"
