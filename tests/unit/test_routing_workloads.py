"""The routing state per workload: each workload's own release line, the shared release and the
global fields kept apart by every change, rollback and compare-and-swap (pure logic and the
local store, no server)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from infra.errors import RejectedVersion, ReleaseError, ReleaseInterrupted
from infra.routing import (
    RoutingState,
    StateChange,
    StoreRouting,
    WorkloadRelease,
    apply_change,
    apply_rollback,
    compare_and_swap,
    load_state,
    parse_state,
    save_state,
    scoped,
)
from infra.store import LocalStore


def two_workloads() -> RoutingState:
    """The shared release in canary, workload ``sql`` in canary with its own candidate and
    ``support`` with a stable of its own."""
    return RoutingState(
        stable="v0",
        candidate="v1",
        phase="canary",
        weight=10,
        release_id="v1-aaaa",
        workloads={
            "sql": WorkloadRelease(candidate="sql-1", phase="canary", weight=25, release_id="r"),
            "support": WorkloadRelease(stable="sup-1", phase="promoted"),
        },
    )


def shared_fields(state: RoutingState) -> dict[str, object]:
    return state.model_dump(exclude={"workloads", "revision", "updated_at"})


def test_a_workload_without_its_own_release_is_routed_by_the_shared_one() -> None:
    state = two_workloads()
    assert state.for_workload(None) is state
    assert state.for_workload("unknown") is state  # the shared canary too
    fresh = state.release_of("unknown")  # what a release for it starts from
    assert (fresh.stable, fresh.candidate, fresh.phase, fresh.history) == ("v0", None, "idle", [])


def test_a_workload_view_has_its_own_release_over_the_shared_stable() -> None:
    state = two_workloads()
    sql = state.for_workload("sql")
    assert (sql.stable, sql.candidate, sql.weight, sql.workload) == ("v0", "sql-1", 25, "sql")
    assert state.for_workload("support").stable == "sup-1"
    assert sql.revision == state.revision and sql.workloads == {}


def test_a_change_to_one_workload_leaves_the_others_and_the_shared_release_alone() -> None:
    state = two_workloads()
    change = StateChange(workload="sql", weight=50, step=1, reason="canary step 2")
    new = apply_change(state, change)
    assert new.for_workload("sql").weight == 50
    assert new.workloads["support"] == state.workloads["support"]
    assert shared_fields(new) == shared_fields(state)
    assert [t.reason for t in new.workloads["sql"].history] == ["canary step 2"]
    assert new.history == []  # the shared audit trail does not see sql's step


def test_a_workload_release_starts_fresh_and_keeps_following_the_shared_stable() -> None:
    state = two_workloads()
    new = apply_change(
        state, StateChange(workload="chat", candidate="chat-1", phase="gating", release_id="c")
    )
    assert new.workloads["chat"].stable is None  # not its own: follows the shared stable
    moved = apply_change(new, StateChange(stable="v9", phase="promoted", candidate=None))
    assert moved.for_workload("chat").stable == "v9"


def test_a_workload_promotion_gives_it_a_stable_of_its_own() -> None:
    state = two_workloads()
    change = StateChange(workload="sql", stable="sql-1", candidate=None, weight=0, phase="promoted")
    new = apply_change(state, change)
    assert new.workloads["sql"].stable == "sql-1" and new.stable == "v0"
    assert new.for_workload("sql").stable == "sql-1"


def test_retired_is_global_and_no_workload_change_may_touch_it() -> None:
    state = two_workloads().model_copy(update={"retired": ["sup-1"]})
    with pytest.raises(ReleaseError, match="global"):
        apply_change(state, StateChange(workload="sql", retired=[]))
    assert state.release_of("sql").retired == ["sup-1"]
    with pytest.raises(RejectedVersion, match="retired"):
        apply_change(state, StateChange(workload="sql", candidate="sup-1", weight=5))


def test_a_workload_rollback_rejects_its_candidate_alone() -> None:
    state = two_workloads()
    new = apply_rollback(state, reason="alert", actor="alertmanager", workload="sql")
    assert new is not None
    sql = new.for_workload("sql")
    assert (sql.candidate, sql.weight, sql.phase, sql.rejected) == (
        None,
        0,
        "rolled_back",
        ["sql-1"],
    )
    assert shared_fields(new) == shared_fields(state)
    assert new.workloads["support"] == state.workloads["support"]


def test_a_workload_rollback_about_another_release_changes_nothing() -> None:
    state = two_workloads()
    with pytest.raises(ReleaseInterrupted) as err:
        apply_rollback(state, reason="late", actor="x", workload="sql", release_id="old")
    assert err.value.state.workload == "sql"
    assert apply_rollback(state, reason="x", actor="x", workload="nothing-here") is None


def test_the_state_file_round_trips_and_old_files_still_parse(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    saved = save_state(store, two_workloads())
    assert load_state(store) == saved
    old = parse_state(b'{"stable": "v3", "candidate": null, "phase": "idle", "revision": 4}')
    assert old.workloads == {} and old.for_workload("sql").stable == "v3"


def test_scoped_routing_acts_on_one_workload_through_the_store(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    save_state(store, two_workloads())
    sql = scoped(StoreRouting(store), "sql")
    assert sql.load().candidate == "sql-1"
    done, view = sql.rollback(reason="manual", actor="ops", version="sql-1")
    assert done and view.workload == "sql" and view.rejected == ["sql-1"]
    stored = load_state(store)
    assert (stored.candidate, stored.weight) == ("v1", 10)  # the shared canary goes on
    assert scoped(StoreRouting(store), None).load() == stored


def test_concurrent_changes_to_two_workloads_both_land(tmp_path: Path) -> None:
    """Each writer reads the whole state, decides on its workload and writes by
    compare-and-swap: whoever loses the race reads again, and neither change is lost."""
    store = LocalStore(tmp_path / "store")
    save_state(store, two_workloads())
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def step(workload: str, weight: float) -> None:
        routing = scoped(StoreRouting(LocalStore(tmp_path / "store")), workload)
        first = [True]

        def decide(view: RoutingState) -> StateChange:
            if first[0]:  # both writers hold the same revision before either writes
                first[0] = False
                barrier.wait(timeout=10)
            return StateChange(weight=weight, expected_revision=view.revision, reason="step")

        try:
            compare_and_swap(
                routing.load,
                decide,
                lambda _, change: routing.transition(change),
                operation="test.workloads",
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [
        threading.Thread(target=step, args=("sql", 50.0)),
        threading.Thread(target=step, args=("chat", 5.0)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    final = load_state(store)
    assert final.for_workload("sql").weight == 50 and final.workloads["chat"].weight == 5
    assert final.revision == 3 and (final.candidate, final.weight) == ("v1", 10)


def test_the_default_workload_is_the_shared_release() -> None:
    """Traces without a workload are recorded under ``default``: naming it names the shared
    release, never a second release line beside it."""
    state = two_workloads()
    assert state.for_workload("default") is state and state.release_of("default") is state
    new = apply_change(state, StateChange(workload="default", weight=20))
    assert new.weight == 20 and "default" not in new.workloads
    rolled = apply_rollback(state, reason="r", actor="a", workload="default")
    assert rolled is not None and rolled.rejected == ["v1"] and "default" not in rolled.workloads
    with pytest.raises(ReleaseError, match="shared release"):
        state.with_workload("default", state)


def test_a_workload_view_is_never_written_as_the_whole_state(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    saved = save_state(store, two_workloads())
    with pytest.raises(ReleaseError, match="view"):
        save_state(store, saved.release_of("sql"), force=True)
    assert load_state(store) == saved
