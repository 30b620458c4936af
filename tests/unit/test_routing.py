"""Routing decisions, the routing state and its rollback (pure logic, no server)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from infra.errors import StateConflict
from infra.gateway.chat_request import BadRequest, ChatLimits, parse_chat_request
from infra.gateway.cohorts import StateWatcher, bucket, decide
from infra.routing import (
    RoutingState,
    StoreRouting,
    apply_rollback,
    load_state,
    record_transition,
    save_state,
)
from infra.store import LocalStore


def rollback(store: LocalStore, *, reason: str, actor: str) -> RoutingState:
    return StoreRouting(store).rollback(reason=reason, actor=actor)[1]


USERS = [f"user-{i}" for i in range(2000)]


def canary(weight: float, **kw: object) -> RoutingState:
    return RoutingState(
        **{"stable": "v0", "candidate": "v1", "phase": "canary", "weight": weight, **kw}
    )


def test_canary_share_is_close_to_the_weight_over_2000_users() -> None:
    state = canary(25)
    share = sum(decide(state, model="flywheel", sticky_key=u).route == "canary" for u in USERS)
    assert abs(share / len(USERS) - 0.25) <= 0.03


def test_a_user_always_gets_the_same_version() -> None:
    state = canary(25)
    first = {u: decide(state, model="flywheel", sticky_key=u).version for u in USERS[:300]}
    for _ in range(3):
        again = {u: decide(state, model="flywheel", sticky_key=u).version for u in USERS[:300]}
        assert again == first


def test_raising_the_weight_keeps_canary_users_on_the_canary() -> None:
    at5 = {u for u in USERS if decide(canary(5), model="flywheel", sticky_key=u).route == "canary"}
    at25 = {
        u for u in USERS if decide(canary(25), model="flywheel", sticky_key=u).route == "canary"
    }
    assert at5 and at5 <= at25
    assert len(at25) > 3 * len(at5)


def test_a_new_candidate_draws_a_different_cohort() -> None:
    v1 = {u for u in USERS if bucket(u, salt="v1") < 2500}
    v2 = {u for u in USERS if bucket(u, salt="v2") < 2500}
    assert v1 != v2


@pytest.mark.parametrize(
    "state",
    [
        RoutingState(stable="v0"),
        canary(0),
        canary(100, rejected=["v1"]),  # a rejected version never gets traffic again
        RoutingState(stable="v1", candidate="v1", weight=50),
    ],
)
def test_no_routable_candidate_means_everyone_on_stable(state: RoutingState) -> None:
    routes = {decide(state, model="flywheel", sticky_key=u).route for u in USERS[:500]}
    versions = {decide(state, model="flywheel", sticky_key=u).version for u in USERS[:500]}
    assert routes == {"stable"} and versions == {state.stable}


def test_full_weight_sends_everyone_to_the_candidate() -> None:
    assert {decide(canary(100), model="flywheel", sticky_key=u).version for u in USERS} == {"v1"}


def test_an_explicit_version_is_pinned_and_never_shadowed() -> None:
    state = canary(50, shadow_fraction=1.0)
    decision = decide(state, model="v7", sticky_key="u")
    assert (decision.version, decision.route, decision.shadow_version) == ("v7", "pinned", None)


def test_shadow_copies_follow_the_fraction_and_only_mirror_stable_requests() -> None:
    state = RoutingState(stable="v0", candidate="v1", phase="shadow", shadow_fraction=0.2)
    rng = random.Random(1)
    decisions = [decide(state, model="flywheel", sticky_key=u, rand=rng.random) for u in USERS]
    shadowed = [d for d in decisions if d.shadow_version == "v1"]
    assert all(d.version == "v0" and d.route == "stable" for d in decisions)
    assert abs(len(shadowed) / len(USERS) - 0.2) < 0.04


def test_rollback_takes_all_traffic_away_and_rejects_the_candidate() -> None:
    state = canary(25, shadow_fraction=0.1)
    new = apply_rollback(state, reason="errors", actor="test", evidence={"ratio": 2.0})
    assert new is not None
    assert (new.weight, new.shadow_fraction, new.phase) == (0.0, 0.0, "rolled_back")
    assert new.candidate is None and new.rejected == ["v1"]
    last = new.history[-1]
    assert (last.from_phase, last.to_phase, last.candidate, last.reason) == (
        "canary",
        "rolled_back",
        "v1",
        "errors",
    )
    assert last.evidence == {"ratio": 2.0}
    assert apply_rollback(new, reason="again", actor="test") is None  # idempotent


def test_record_transition_validates_the_new_values() -> None:
    with pytest.raises(ValueError):
        record_transition(canary(5), to_phase="canary", actor="t", reason="r", weight=150)


def test_save_state_refuses_to_overwrite_a_newer_state(tmp_path) -> None:
    store = LocalStore(tmp_path)
    stale = load_state(store)
    fresh = save_state(store, canary(5))
    assert fresh.revision == 1
    stale.weight = 50
    with pytest.raises(StateConflict):
        save_state(store, stale)
    assert load_state(store).weight == 5


def test_rollback_function_writes_the_state_once(tmp_path) -> None:
    store = LocalStore(tmp_path)
    save_state(store, canary(25))
    first = rollback(store, reason="manual", actor="test")
    second = rollback(store, reason="manual", actor="test")
    assert load_state(store).weight == 0 and load_state(store).rejected == ["v1"]
    assert first.revision == second.revision == 2  # the second call wrote nothing


def test_watcher_keeps_a_local_rollback_until_the_store_has_it(tmp_path) -> None:
    store = LocalStore(tmp_path)
    save_state(store, canary(25))
    watcher = StateWatcher(store)
    assert watcher.refresh() and watcher.state.weight == 25
    local = apply_rollback(watcher.state, reason="alert", actor="test")
    assert local is not None
    local.revision = watcher.state.revision + 1
    watcher.set_local(local, persisted=False)  # the state write has not happened (yet)
    save_state(store, canary(50), force=True)  # a stale writer: revision 1 again
    watcher.refresh()
    assert watcher.state.weight == 0  # the older revision does not undo the rollback
    rollback(store, reason="alert", actor="test")  # now the store holds revision 2
    assert watcher.refresh() and watcher.state.revision == 2 and watcher.state.weight == 0
    save_state(store, load_state(store).model_copy(update={"candidate": "v2", "weight": 5}))
    assert watcher.refresh() and watcher.state.candidate == "v2"  # later writes win again


class SlowStateStore(LocalStore):
    """A local store whose reads wait for ``go`` once ``hold`` is set (a slow S3 GET)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.hold, self.reading, self.go = False, threading.Event(), threading.Event()

    def get(self, key: str) -> bytes:
        data = super().get(key)
        if self.hold:
            self.reading.set()
            self.go.wait(10)
        return data


def test_a_read_begun_before_a_transition_does_not_bring_back_the_state_it_replaced(
    tmp_path: Path,
) -> None:
    """The gateway's poll read the stored rollback, an admin transition then wrote and set a
    new release, and the poll's late answer must not route by the rollback again (a release
    begun right after a rollback was found rolled back by its next step)."""
    store = SlowStateStore(tmp_path)
    save_state(store, canary(25))
    watcher = StateWatcher(store)
    assert watcher.refresh()
    rolled = StoreRouting(store).rollback(reason="alert", actor="alertmanager")[1]
    watcher.set_local(rolled, persisted=True)  # the webhook's rollback, written and set
    store.hold = True
    late = threading.Thread(target=watcher.refresh)
    late.start()
    assert store.reading.wait(10)  # the poll holds the rollback's bytes
    started = canary(0, candidate="v2", phase="gating", revision=rolled.revision)
    saved = save_state(store, started, force=True)  # the admin API's transition, written
    watcher.set_local(saved, persisted=True)
    store.go.set()
    late.join(10)
    assert watcher.state.candidate == "v2" and watcher.state.phase == "gating"
    store.hold = False
    watcher.refresh()  # the next poll reads the store as it is
    assert watcher.state.candidate == "v2"


def test_watcher_survives_a_missing_or_broken_state(tmp_path) -> None:
    store = LocalStore(tmp_path)
    watcher = StateWatcher(store)
    assert not watcher.refresh() and watcher.state.stable == "v0"
    save_state(store, canary(5))
    assert watcher.refresh() and watcher.state.weight == 5
    store.put("deploy/state.json", b"{not json")
    assert not watcher.refresh() and watcher.state.weight == 5  # keeps the last good state


def limits(max_messages: int) -> ChatLimits:
    return ChatLimits(max_tokens_limit=4096, max_messages=max_messages)


def test_parse_chat_request_extracts_what_the_trace_needs() -> None:
    body = {
        "model": "flywheel",
        "messages": [
            {"role": "system", "content": "calculator: 2+2=4"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": [{"type": "text", "text": "what is 2+2?"}]},
        ],
        "user": "alice",
        "temperature": 0.5,
        "stop": ["\n"],
    }
    req = parse_chat_request(body, limits=limits(100), session_header="s1")
    assert req.question == "what is 2+2?"
    assert req.contexts == ["calculator: 2+2=4"]
    assert (req.user_id, req.session_id) == ("alice", "s1")
    assert req.params.temperature == 0.5 and req.params.max_tokens is None  # none named
    assert req.params.extra == {"stop": ["\n"]}  # passed through; `user` never is
    custom = parse_chat_request(
        {**body, "contexts": ["doc"]}, limits=limits(9), session_header=None
    )
    assert custom.contexts == ["doc"]


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"messages": []},
        {"messages": [{"content": "x"}]},
        {"messages": [{"role": "user"}], "temperature": "hot"},
    ],
)
def test_parse_chat_request_rejects_malformed_bodies(body: object) -> None:
    with pytest.raises(BadRequest):
        parse_chat_request(body, limits=limits(100), session_header=None)


def test_compare_and_swap_decides_again_on_the_state_a_concurrent_writer_left(
    tmp_path: Path,
) -> None:
    from infra.retries import RETRIES
    from infra.routing import StateChange, compare_and_swap

    store = LocalStore(tmp_path / "store")
    save_state(store, RoutingState(candidate="v1", phase="canary", weight=5))
    routing = StoreRouting(store)
    seen: list[float] = []

    def step_up(state: RoutingState) -> StateChange | None:
        seen.append(state.weight)
        if len(seen) == 1:  # another writer (an alert rollback) lands between read and write
            routing.rollback(reason="alert", actor="alertmanager")
        if state.candidate is None:
            return None  # rolled back meanwhile: nothing to write
        return StateChange(weight=25, expected_revision=state.revision, reason="step 2")

    before = RETRIES.snapshot().get("test.cas", 0)
    found, written = compare_and_swap(
        routing.load, step_up, lambda _, change: routing.transition(change), operation="test.cas"
    )
    assert written is None and seen == [5.0, 0.0]
    assert (found.phase, found.weight, found.rejected) == ("rolled_back", 0.0, ["v1"])
    assert RETRIES.snapshot()["test.cas"] == before + 1
