"""Every decision names the release it is about (DESIGN "Release state machine"): a stale run
never acts on the next candidate, a release starts only on the state it writes over, and a
promotion can be rolled back to the previous stable during the bake period (local routing, no
services)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from infra.errors import RejectedVersion, ReleaseError, ReleaseInterrupted
from infra.routing import RoutingState, StoreRouting, save_state
from infra.settings import ReleaseSettings
from infra.store import LocalStore
from tasks.release.canary.rollout import PhaseResult
from tasks.release.machine import controls, machine, transitions
from tasks.release.machine.adapters import unload_unrouted

POLICY = ReleaseSettings(canary_steps=(5, 100), shadow_fraction=0.0)
FAILED = PhaseResult(verdict="fail", reasons=["error ratio 3x stable"])


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    s = LocalStore(tmp_path / "store")
    save_state(s, RoutingState(stable="v0"))
    return s


@pytest.fixture
def routing(store: LocalStore) -> StoreRouting:
    return StoreRouting(store)


def in_canary(routing: StoreRouting, version: str, *, force: bool = False) -> RoutingState:
    transitions.begin_release(routing, None, version, actor="flow", force=force)
    return transitions.canary_move(
        routing, None, version, step=0, policy=POLICY, actor="flow"
    ).or_raise()


def stale_failure(routing: StoreRouting, version: str, **kw: str | None) -> RoutingState:
    return machine.conclude(
        routing,
        None,
        version,
        at=machine.Step("canary"),
        result=FAILED,
        policy=POLICY,
        actor="flow",
        **kw,
    )


def test_a_stale_run_failing_never_rejects_the_next_candidate(routing: StoreRouting) -> None:
    in_canary(routing, "v5")
    controls.abort(routing, None, actor="person", reason="wrong data")
    v6 = in_canary(routing, "v6")
    found = stale_failure(routing, "v5")  # v5's old run reaches its verdict only now
    stored = routing.load()
    assert (stored.candidate, stored.phase, stored.weight) == ("v6", "canary", 5.0)
    assert stored.rejected == ["v5"] and stored.revision == v6.revision
    assert found.candidate == "v6"


def test_a_stale_run_of_an_earlier_release_of_the_same_version_changes_nothing(
    routing: StoreRouting,
) -> None:
    first = in_canary(routing, "v5")
    controls.abort(routing, None, actor="person", reason="wrong data")
    again = in_canary(routing, "v5", force=True)  # a person released it again
    assert again.release_id != first.release_id
    stale_failure(routing, "v5", release_id=first.release_id)
    assert routing.load().revision == again.revision
    stale_failure(routing, "v5", release_id=again.release_id)  # this release's own run
    assert routing.load().rejected == ["v5"] and routing.load().weight == 0


def test_a_stale_decision_is_refused_with_the_release_found(routing: StoreRouting) -> None:
    in_canary(routing, "v5")
    controls.abort(routing, None, actor="person")
    in_canary(routing, "v6")
    with pytest.raises(ReleaseInterrupted, match="v6") as refused:
        routing.rollback(reason="late", actor="flow", version="v5")
    assert refused.value.state.candidate == "v6"


class Meanwhile(StoreRouting):
    """The stored routing, on which another writer (``meanwhile``) lands once, right after the
    first read: a concurrent start or rollback between a decision's read and its write."""

    def __init__(self, store: LocalStore, meanwhile: Callable[[], object]) -> None:
        super().__init__(store)
        self.meanwhile: Callable[[], object] | None = meanwhile

    def load(self) -> RoutingState:
        state = super().load()
        if (then := self.meanwhile) is not None:
            self.meanwhile = None
            then()
        return state


def test_two_releases_started_at_once_never_both_start(store: LocalStore) -> None:
    routing = StoreRouting(store)

    def another_run() -> None:
        transitions.begin_release(routing, None, "v2", actor="another run")

    with pytest.raises(ReleaseError, match="v2 is being released"):
        transitions.begin_release(Meanwhile(store, another_run), None, "v1", actor="flow")
    stored = routing.load()
    assert (stored.candidate, stored.phase) == ("v2", "gating")
    assert [t.candidate for t in stored.history if t.to_phase == "gating"] == ["v2"]


def test_a_version_rejected_between_the_read_and_the_write_is_not_released(
    store: LocalStore,
) -> None:
    routing = StoreRouting(store)
    transitions.begin_release(routing, None, "v1", actor="flow")
    why = {"reason": "gate: manual review", "evidence": {}}
    resume = transitions.Resume(phase="shadow")
    transitions.hold(routing, None, "v1", actor="flow", resume=resume, **why)

    def person_rejects() -> None:  # while the held v1's release is started again
        transitions.reject(routing, None, "v1", actor="person", reason="wrong data", evidence={})

    with pytest.raises(RejectedVersion, match="v1 was rejected"):
        transitions.begin_release(Meanwhile(store, person_rejects), None, "v1", actor="flow")
    stored = routing.load()
    assert (stored.candidate, stored.phase, stored.weight) == (None, "rolled_back", 0.0)
    assert stored.rejected == ["v1"]


def promoted(routing: StoreRouting) -> RoutingState:
    in_canary(routing, "v1")
    return transitions.promotion(routing, None, "v1", actor="flow", reason="passed").or_raise()


def test_a_person_rolls_a_promotion_back_to_the_previous_stable_in_one_step(
    routing: StoreRouting,
) -> None:
    before = promoted(routing)
    done, state = routing.rollback(reason="answers got worse", actor="oncall")
    assert done and (state.stable, state.candidate, state.phase) == ("v0", None, "rolled_back")
    assert state.rejected == ["v1"] and state.revision == before.revision + 1
    last = state.history[-1]
    assert (last.candidate, last.actor, last.evidence["previous_stable"]) == ("v1", "oncall", "v0")
    assert routing.rollback(reason="again", actor="oncall")[0] is False  # idempotent


class Served:
    """A model server with adapters loaded (what ``unload_unrouted`` asks)."""

    base_version = "base"

    def __init__(self, *versions: str) -> None:
        self.loaded = list(versions)

    def served(self) -> list[str]:
        return list(self.loaded)

    def unload(self, version: str) -> None:
        self.loaded.remove(version)


def test_after_a_promotion_rollback_the_previous_stable_stays_loaded(
    routing: StoreRouting,
) -> None:
    server = Served("v0", "v1")
    promoted(routing)
    assert unload_unrouted(server, routing.load(), bake_s=600) == []  # v0 bakes
    _, state = routing.rollback(reason="worse", actor="oncall")
    assert unload_unrouted(server, state, bake_s=600) == ["v1"] and server.loaded == ["v0"]


def test_after_the_bake_period_a_promotion_is_not_rolled_back(store: LocalStore) -> None:
    promoted(StoreRouting(store))
    done, state = StoreRouting(store, bake_s=0).rollback(reason="late", actor="oncall")
    assert not done and (state.stable, state.phase) == ("v1", "promoted")
