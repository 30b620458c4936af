"""The routing state's compare-and-swap under a real race: an alert rollback and a canary step
started at the same instant against the same state, many times, on the local store and on an
S3 protocol server on loopback (moto). The rollback must never be lost: every round ends rolled
back with the candidate rejected."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from infra.errors import PreconditionFailed
from infra.routing import RoutingState, StoreRouting, load_state, save_state
from infra.settings import ReleaseSettings
from infra.store import LocalStore, ObjectStore, S3Store
from tasks.release.canary.rollout import PhaseResult
from tasks.release.machine.machine import after_canary_step
from tests.procs import s3_server

pytestmark = pytest.mark.integration

POLICY = ReleaseSettings(canary_steps=(5, 25, 50, 100))
CANARY = RoutingState(stable="v0", candidate="v1", phase="canary", weight=5.0, step=0)


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with s3_server("race") as endpoint:
        yield endpoint


@pytest.fixture(params=["local", "s3"])
def make_store(request: pytest.FixtureRequest, tmp_path) -> Callable[[], ObjectStore]:
    """A factory of independent store clients over the same objects (one per writer, as
    separate processes would have)."""
    if request.param == "local":
        return lambda: LocalStore(tmp_path / "store")
    endpoint = request.getfixturevalue("s3_endpoint")
    prefix = f"s3://race/{request.node.name}"
    return lambda: S3Store(
        prefix, endpoint_url=endpoint, access_key_id="testing", secret_access_key="testing"
    )


def test_a_stale_etag_never_writes(make_store: Callable[[], ObjectStore]) -> None:
    store = make_store()
    etag = store.put_if("deploy/x.json", b"one", etag=None)
    with pytest.raises(PreconditionFailed):
        store.put_if("deploy/x.json", b"again", etag=None)  # exists already
    newer = make_store().put_if("deploy/x.json", b"two", etag=etag)
    with pytest.raises(PreconditionFailed):
        store.put_if("deploy/x.json", b"stale", etag=etag)
    assert store.get_versioned("deploy/x.json") == (b"two", newer)
    assert store.list("deploy/") == ["deploy/x.json"]  # no lock file shows up as an object


def race_once(make_store: Callable[[], ObjectStore], round_no: int) -> tuple[RoutingState, str]:
    """One round: who wrote first, and the state after both writers finished."""
    save_state(make_store(), CANARY.model_copy(update={"revision": 10 * round_no}), force=True)
    alert, canary = StoreRouting(make_store()), StoreRouting(make_store())
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(fn: Callable[[], object]) -> None:
        start.wait()
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    def alert_rollback() -> None:
        alert.rollback(reason="alert firing for v1", actor="alertmanager")

    def canary_step() -> None:
        passed = PhaseResult(verdict="pass", reasons=["healthy"], evidence={"source": "race"})
        after_canary_step(
            canary, None, "v1", step=0, result=passed, policy=POLICY, actor="release-flow"
        )

    threads = [threading.Thread(target=run, args=(fn,)) for fn in (alert_rollback, canary_step)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    state = load_state(make_store())
    phases = [t.to_phase for t in state.history]
    first = "rollback" if phases[0] == "rolled_back" else "canary step"
    return state, first


def test_a_canary_step_never_overwrites_a_concurrent_alert_rollback(
    make_store: Callable[[], ObjectStore],
) -> None:
    rounds = 60
    first = Counter()
    for round_no in range(rounds):
        state, who = race_once(make_store, round_no)
        first[who] += 1
        assert (state.phase, state.weight, state.shadow_fraction) == ("rolled_back", 0.0, 0.0)
        assert state.candidate is None and state.rejected == ["v1"]
        assert state.history[-1].actor == "alertmanager"
        # a canary step that won the race is followed by the rollback, never the reverse
        assert [t.to_phase for t in state.history] in (["rolled_back"], ["canary", "rolled_back"])
    assert sum(first.values()) == rounds
