"""The canary's error rates on simulated releases through the real analysis (the fast version
of tests/benchmarks/bench_release_decisions.py; fixed seeds), and one user's voice."""

from __future__ import annotations

import pytest

from infra.gateway.metrics import GatewayMetrics
from infra.promql import EmbeddedMetrics
from infra.settings import ReleaseSettings
from tasks.release.canary import analyse_step
from tests.benchmarks.release_sim import KNOWN_BAD, SAME, Population, simulate_canary

pytestmark = pytest.mark.slow


def test_identical_versions_under_bursty_load_are_promoted() -> None:
    outcomes = [simulate_canary(SAME, seed=500 + s).outcome for s in range(30)]
    assert outcomes.count("promoted") >= 29, outcomes  # alpha 0.05: at most 1.5 of 30


@pytest.mark.parametrize("kind", sorted(KNOWN_BAD))
def test_known_bad_candidates_are_caught(kind: str) -> None:
    outcomes = [simulate_canary(KNOWN_BAD[kind], seed=700 + s).outcome for s in range(12)]
    assert outcomes.count("promoted") == 0, outcomes


def test_one_hostile_client_does_not_decide_a_release() -> None:
    """A client that votes down every answer it gets is one user among hundreds."""
    pop = Population(hostile_user=True)
    outcomes = [simulate_canary(SAME, seed=900 + s, pop=pop).outcome for s in range(8)]
    assert outcomes.count("promoted") == 8, outcomes


def test_one_users_200_down_votes_do_not_fail_a_step_20_users_pass() -> None:
    metrics = GatewayMetrics()
    reader = EmbeddedMetrics(lambda: metrics.render().decode(), clock=lambda: 0.0)
    since = reader.mark()
    epoch = ("r1", "v1", "canary", 25.0, 1)
    for user in range(1, 61):  # 20 canary users and 40 stable users, one answer each
        model, route = ("v1", "canary") if user <= 20 else ("v0", "stable")
        metrics.observe(model=model, route=route, seconds=0.1, error=False, voter=user, epoch=epoch)
        value = 1 if user % 4 else -1  # three of four like their answer, on both versions
        metrics.vote(model=model, value=value, workload="default", voter=user, epoch=epoch)
    for _ in range(200):  # user 0, on the canary: a down-vote on every answer it gets
        metrics.observe(model="v1", route="canary", seconds=0.1, error=False, voter=0, epoch=epoch)
        metrics.vote(model="v1", value=-1, workload="default", voter=0, epoch=epoch)
    window = reader.read(candidate="v1", stable="v0", since=since)
    policy = ReleaseSettings(min_requests_per_step=20, min_feedback=20)

    result = analyse_step(window, policy)

    assert window.candidate.feedback == {1: 15.0, -1: 6.0}  # 21 users, 21 voices
    assert window.stable.feedback == {1: 30.0, -1: 10.0}
    assert result.verdict == "pass", result.reasons
