"""The release state machine and a person's controls on one workload's release: a release of
workload ``sql`` (gate, canary, promote, pause, resume, abort, rollback) runs beside the shared
release and never changes it, nor another workload's (local routing, no services)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployments import cli
from infra.routing import (
    RoutingState,
    StoreRouting,
    WorkloadRelease,
    load_state,
    save_state,
    scoped,
)
from infra.routing.alerts import alerts_by_workload
from infra.serving.models import ServableVersions
from infra.settings import ReleaseSettings, get_settings
from infra.store import LocalStore
from tasks.release.canary.rollout import PhaseResult
from tasks.release.gate.report import gate_evidence
from tasks.release.machine import controls, machine, transitions
from tasks.release.machine.adapters import unload_unrouted
from tests.helpers import gate_result

CFG = ReleaseSettings(canary_steps=(5, 100), shadow_fraction=0.2)
BETTER = ([0.0, 1.0] * 30, [1.0] * 60)
PASSED = PhaseResult(verdict="pass", reasons=["fine"])
SHARED = RoutingState(stable="v0", candidate="v1", phase="canary", weight=5, release_id="v1-r")


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    s = LocalStore(tmp_path / "store")
    other = WorkloadRelease(candidate="chat-1", phase="canary", weight=50, release_id="c")
    save_state(s, SHARED.model_copy(update={"workloads": {"chat": other}}))
    return s


def untouched(store: LocalStore) -> None:
    """The shared release and workload ``chat`` are as the fixture wrote them."""
    state = load_state(store)
    assert (state.candidate, state.phase, state.weight, state.history) == ("v1", "canary", 5, [])
    chat = state.workloads["chat"]
    assert (chat.candidate, chat.weight, chat.history) == ("chat-1", 50, [])


def versions(store: LocalStore) -> ServableVersions:
    return ServableVersions(store, frozenset(("v0", "v1", "sql-1", "chat-1")))


def test_a_workload_release_runs_to_promotion_beside_the_shared_one(store: LocalStore) -> None:
    sql = scoped(StoreRouting(store), "sql")
    begun = transitions.begin_release(sql, None, "sql-1", actor="flow")  # shared one is active
    assert (begun.workload, begun.phase, begun.stable) == ("sql", "gating", "v0")
    result = gate_result("sql-1", *BETTER, run_id="r")
    state = machine.apply_gate(
        sql,
        None,
        result,
        gate=gate_evidence(result, {}),
        policy=CFG,
        actor="flow",
        skip_shadow=True,
    )
    assert (state.phase, state.weight) == ("canary", 5)
    for step in (0, 1):
        state = machine.after_canary_step(
            sql, None, "sql-1", step=step, result=PASSED, policy=CFG, actor="flow"
        )
    assert (state.phase, state.stable, state.candidate) == ("promoted", "sql-1", None)
    stored = load_state(store)
    assert stored.workloads["sql"].stable == "sql-1" and stored.stable == "v0"
    assert [t.to_phase for t in stored.workloads["sql"].history] == [
        "gating",
        "canary",
        "canary",
        "promoted",
    ]
    untouched(store)


def test_pause_resume_and_abort_act_on_the_named_workload_alone(store: LocalStore) -> None:
    chat = scoped(StoreRouting(store), "chat")
    held = controls.pause(chat, None, actor="person")
    assert (held.phase, held.weight) == ("held", 50)
    assert load_state(store).phase == "canary"
    resumed = controls.resume(chat, None, actor="person")
    assert (resumed.phase, resumed.weight) == ("canary", 50)
    aborted = controls.abort(chat, None, actor="person")
    assert (aborted.phase, aborted.weight, aborted.rejected) == ("rolled_back", 0, ["chat-1"])
    state = load_state(store)
    assert (state.candidate, state.phase, state.weight, state.rejected) == (
        "v1",
        "canary",
        5,
        [],
    )
    assert state.for_workload("chat").candidate is None


def test_promote_and_rollback_name_one_workload(store: LocalStore) -> None:
    chat = scoped(StoreRouting(store), "chat")
    promoted = controls.promote(
        chat, None, actor="person", versions=versions(store), force=True, reason="reviewed"
    )
    assert (promoted.stable, promoted.phase) == ("chat-1", "promoted")
    assert load_state(store).stable == "v0"
    done, state = StoreRouting(store, bake_s=600).rollback(
        reason="worse", actor="oncall", workload="chat"
    )
    assert done and state.for_workload("chat").stable == "v0"
    assert state.workloads["chat"].rejected == ["chat-1"]
    assert (state.stable, state.candidate, state.weight) == ("v0", "v1", 5)


def test_release_status_through_a_workload_shows_its_release() -> None:
    class Fixed:
        name = "fixed"

        def load(self) -> RoutingState:
            return SHARED.model_copy(update={"workloads": {"sql": WorkloadRelease(weight=3)}})

    shared = controls.release_status(Fixed())  # type: ignore[arg-type]
    assert [r["workload"] for r in shared["workloads"]] == [None, "sql"]
    mine = controls.release_status(scoped(Fixed(), "sql"))  # type: ignore[arg-type]
    assert mine["weight"] == 3 and mine["workloads"][0]["workload"] == "sql"


def test_an_alert_acts_on_its_workload_label_else_the_workload_of_its_model() -> None:
    state = SHARED.model_copy(
        update={"workloads": {"sql": WorkloadRelease(candidate="sql-1", phase="canary")}}
    )

    def alert(**labels: str) -> dict[str, object]:
        return {"status": "firing", "labels": labels}

    groups = alerts_by_workload(
        state,
        [alert(model="v1"), alert(model="sql-1"), alert(model="x", workload="chat")],
    )
    assert {k: [a["labels"]["model"] for a in v] for k, v in groups.items()} == {
        None: ["v1"],
        "sql": ["sql-1"],
        "chat": ["x"],
    }
    assert alerts_by_workload(state, []) == {None: []}


def test_adapters_another_workload_routes_to_stay_loaded() -> None:
    class Server:
        base_version = "base"

        def __init__(self) -> None:
            self.loaded = {"base", "v0", "v1", "sql-0", "sql-1", "old"}

        def served(self) -> list[str]:
            return sorted(self.loaded)

        def unload(self, version: str) -> None:
            self.loaded.discard(version)

    state = RoutingState(
        stable="v0",
        candidate="v1",
        weight=5,
        workloads={"sql": WorkloadRelease(stable="sql-0", phase="rolled_back", rejected=["sql-1"])},
    )
    server = Server()
    view_gone = unload_unrouted(server, state.release_of("sql"), bake_s=600)  # type: ignore[arg-type]
    assert view_gone == ["sql-1"]  # a view unloads only what its workload rejected
    assert unload_unrouted(server, state, bake_s=600) == ["old"]  # type: ignore[arg-type]
    assert server.loaded == {"base", "v0", "v1", "sql-0"}


@pytest.mark.parametrize(
    "argv",
    [
        ["release", "v3", "--workload", "sql"],
        ["promote", "--workload", "sql"],
        ["pause", "--workload", "sql"],
        ["resume", "--workload", "sql"],
        ["abort", "--workload", "sql"],
        ["rollback", "--workload", "sql"],
    ],
)
def test_release_controls_take_a_workload(
    argv: list[str], flywheel_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLYWHEEL_WORKLOADS", '["sql"]')
    get_settings.cache_clear()
    assert cli.build_parser().parse_args(argv).workload == "sql"
    assert cli.build_parser().parse_args(argv[:-2]).workload is None
