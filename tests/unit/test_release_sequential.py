"""The canary's always-valid sequential test: its statistics (error control under continuous
looking) and what it does to a canary step (fake clock, in-memory metrics)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from infra.metrics.promql import CanaryWindow, RouteStats
from infra.routing import RoutingState, StoreRouting, save_state
from infra.settings import ReleaseSettings
from infra.store import LocalStore
from tasks.release.canary.canary import beyond_rails, watch_step
from tasks.release.canary.sequential import (
    SequentialState,
    canary_test_alpha,
    measure,
    msprt_lambda,
    one_sided_lambda,
    sequential_verdict,
)
from tests.unit.test_release_canary import FakeClock

CFG = ReleaseSettings(
    analysis_interval_s=600, step_deadline_s=1200, min_requests_per_step=50, max_poll_s=5
)
START = 1_000_000.0


def test_mixture_ratio_grows_with_evidence_and_stays_small_without() -> None:
    assert msprt_lambda(0.0, 1e-4, 0.01) < 1  # no difference: evidence for H0
    assert msprt_lambda(0.05, 1e-4, 0.01) > msprt_lambda(0.03, 1e-4, 0.01) > 1
    assert msprt_lambda(0.05, 0.0, 0.01) == 1.0  # no information yet
    # each one-sided (half-normal) mixture takes the evidence of its own sign: together they
    # are the two-sided mixture twice, and a difference the other way is evidence against
    both = one_sided_lambda(0.03, 1e-4, 0.01) + one_sided_lambda(-0.03, 1e-4, 0.01)
    assert both == pytest.approx(2 * msprt_lambda(0.03, 1e-4, 0.01))
    assert one_sided_lambda(-0.03, 1e-4, 0.01) < 1 < one_sided_lambda(0.03, 1e-4, 0.01)


def _ever_rejects(rng: np.random.Generator, *, p_cand: float, looks: int, naive: bool) -> bool:
    """One canary under the null-ish scenario, looked at ``looks`` times (20 requests each)."""
    state = SequentialState()
    e_c = n_c = e_s = n_s = 0.0
    for _ in range(looks):
        n_c, e_c = n_c + 20, e_c + rng.binomial(20, p_cand)
        n_s, e_s = n_s + 80, e_s + rng.binomial(80, 0.05)
        window = CanaryWindow(RouteStats(n_c, e_c), RouteStats(n_s, e_s), "sim", 1.0)
        if naive:  # a fixed-horizon z-test run on every look: the peeking it replaces
            pooled = (e_c + e_s) / (n_c + n_s)
            se = math.sqrt(max(pooled * (1 - pooled), 1e-9) * (1 / n_c + 1 / n_s))
            if abs(e_c / n_c - e_s / n_s) / se > 1.96:
                return True
            continue
        if any(m.p_value < 0.05 for m in measure(window, CFG, state)):
            return True
    return False


def test_looking_on_every_poll_keeps_the_false_alarm_rate_under_alpha() -> None:
    rng = np.random.default_rng(7)
    runs = 400
    always_valid = sum(_ever_rejects(rng, p_cand=0.05, looks=60, naive=False) for _ in range(runs))
    peeking = sum(_ever_rejects(rng, p_cand=0.05, looks=60, naive=True) for _ in range(runs))
    assert always_valid / runs <= 0.05
    assert peeking / runs > 0.15  # what looking 60 times at a fixed-horizon test does


def test_a_real_difference_is_found() -> None:
    rng = np.random.default_rng(3)
    found = sum(_ever_rejects(rng, p_cand=0.15, looks=60, naive=False) for _ in range(50))
    assert found >= 48


class Traffic:
    """Candidate requests at ``rate`` per second with ``errors`` share and ``up`` share of
    thumbs up among ``fb_rate`` feedback events per request; stable: 1000 requests, 1 % errors,
    400 feedback events 50 % up, from 19 users for each candidate user (the weight of 5 %)."""

    source = "fake"

    def __init__(
        self, clock: FakeClock, *, rate: float, errors: float, up: float, fb_rate: float = 0.2
    ) -> None:
        self.clock, self.rate, self.errors, self.up, self.fb = clock, rate, errors, up, fb_rate

    def mark(self) -> float:
        return self.clock.now()

    def read(
        self,
        *,
        candidate: str,
        stable: str,
        since: float,
        workload: str | None = None,
    ):
        n = self.rate * (self.clock.now() - since)
        fb = n * self.fb
        return CanaryWindow(
            RouteStats(n, n * self.errors, 0.1, {1: fb * self.up, -1: fb * (1 - self.up)}),
            RouteStats(1000, 10, 0.1, {1: 200, -1: 200}, users=19 * n),
            "fake",
            self.clock.now() - since,
        )


@pytest.fixture
def routing(tmp_path: Path) -> StoreRouting:
    s = LocalStore(tmp_path / "store")
    save_state(s, RoutingState(stable="v0", candidate="v1", phase="canary", weight=5))
    return StoreRouting(s)


def run_step(routing: StoreRouting, **traffic: float):
    clock = FakeClock()
    result = watch_step(
        routing,
        "v1",
        stable="v0",
        metrics=Traffic(clock, **traffic),
        policy=CFG,
        clock=clock,
    )
    return result, clock.now() - START


def test_a_clearly_worse_canary_stops_before_its_horizon(routing: StoreRouting) -> None:
    result, elapsed = run_step(routing, rate=1.0, errors=0.15, up=0.5)
    assert result.verdict == "fail"
    assert elapsed < CFG.analysis_interval_s / 2
    assert "clearly worse" in result.reasons[0] and "error ratio" in result.reasons[0]
    assert result.evidence["sequential"]["looks"] >= 1


def test_clearly_worse_feedback_stops_the_step_too(routing: StoreRouting) -> None:
    result, elapsed = run_step(routing, rate=1.0, errors=0.01, up=0.1)
    assert result.verdict == "fail" and elapsed < CFG.analysis_interval_s
    assert "feedback" in result.reasons[0] and "clearly worse" in result.reasons[0]


def test_an_equal_canary_runs_to_the_horizon_and_passes_the_guard_rails(
    routing: StoreRouting,
) -> None:
    result, elapsed = run_step(routing, rate=1.0, errors=0.01, up=0.5)
    assert result.verdict == "pass"
    assert elapsed == pytest.approx(CFG.analysis_interval_s, abs=CFG.poll_s)
    text = " | ".join(result.reasons)
    assert "errors: 1.00% of 600 requests (600 users) = 1.00x" in text  # the guard rail's line
    assert "always-valid p=" in text and "clearly" not in text


def test_a_clearly_better_canary_passes_early_once_it_has_enough_requests(
    routing: StoreRouting,
) -> None:
    result, elapsed = run_step(routing, rate=1.0, errors=0.0, up=0.95)
    assert result.verdict == "pass"
    assert CFG.min_requests_per_step <= elapsed < CFG.analysis_interval_s
    assert "clearly better" in result.reasons[0]


def _feedback_false_alarm(rng: np.random.Generator, *, looks: int) -> bool:
    """Both versions equally liked (half the thumbs up); each look adds a few votes per side,
    as a short canary step on light traffic does."""
    state = SequentialState()
    cand = {1: 0.0, -1: 0.0}
    stable = {1: 0.0, -1: 0.0}
    for _ in range(looks):
        for votes, n in ((cand, 1), (stable, 2)):
            ups = int(rng.binomial(n, 0.5))
            votes[1] += ups
            votes[-1] += n - ups
        window = CanaryWindow(
            RouteStats(100, 0, feedback=dict(cand)),
            RouteStats(100, 0, feedback=dict(stable)),
            "sim",
            1.0,
        )
        if any(m.p_value < 0.05 for m in measure(window, CFG, state) if m.name == "feedback"):
            return True
    return False


def test_a_few_unanimous_votes_on_equal_versions_are_not_a_verdict() -> None:
    # 3 thumbs down on the candidate against 4 up on stable (seen in an e2e run, where the
    # candidate was 8 points better on the golden set): Fisher's exact test gives p = 0.029,
    # an always-valid test must not claim more certainty than that
    window = CanaryWindow(
        RouteStats(10, 0, feedback={-1: 3}), RouteStats(10, 0, feedback={1: 4}), "sim", 1.0
    )
    [fb] = [m for m in measure(window, CFG, SequentialState()) if m.name == "feedback"]
    assert fb.direction == "worse" and fb.p_value > 0.05
    rng = np.random.default_rng(11)
    runs = 300
    alarms = sum(_feedback_false_alarm(rng, looks=30) for _ in range(runs))
    assert alarms / runs <= 0.05


def test_many_unanimous_votes_against_the_candidate_fail_it() -> None:
    window = CanaryWindow(
        RouteStats(40, 0, feedback={-1: 20}), RouteStats(40, 0, feedback={1: 20}), "sim", 1.0
    )
    [fb] = [m for m in measure(window, CFG, SequentialState()) if m.name == "feedback"]
    assert fb.direction == "worse" and fb.p_value < 1e-3


def _sequential_early(window: CanaryWindow, state: SequentialState):
    """What one look of the sequential test decides, with the guard rails holding."""
    measures = measure(window, CFG, state)
    return sequential_verdict(
        measures,
        alpha=CFG.sequential_alpha,
        fail_alpha=canary_test_alpha(CFG),
        beyond_rail=beyond_rails(measures, CFG),
        enough_requests=True,
        guard_rails_pass=True,
    )


def test_two_error_users_against_none_at_the_5_percent_step_is_not_a_sequential_fail() -> None:
    """50 candidate users against 950 on stable, one request each: 2 errors against 0.
    Fisher's exact test gives p = 0.0025, no stronger than the canary's per-test level; the
    normal approximation the test used gave 0.001 and failed the step at once."""
    window = CanaryWindow(
        RouteStats(50, 2, 0.1, users=50, error_users=2),
        RouteStats(950, 0, 0.1, users=950, error_users=0),
        "sim",
        60.0,
    )
    early, reasons = _sequential_early(window, SequentialState())
    assert early != "fail", reasons
    [errors] = [m for m in measure(window, CFG, SequentialState()) if m.name == "error_ratio"]
    assert errors.direction == "worse" and errors.p_value > 0.05


def _rare_error_false_alarm(rng: np.random.Generator, *, looks: int) -> bool:
    """Equal versions with 0.1 % errors at the 5 % step: each look adds 5 candidate and 95
    stable users of one request each."""
    state = SequentialState()
    n_c = n_s = e_c = e_s = 0
    for _ in range(looks):
        n_c, n_s = n_c + 5, n_s + 95
        e_c, e_s = e_c + rng.binomial(5, 0.001), e_s + rng.binomial(95, 0.001)
        window = CanaryWindow(RouteStats(n_c, e_c, 0.1), RouteStats(n_s, e_s, 0.1), "sim", 1.0)
        if _sequential_early(window, state)[0] == "fail":
            return True
    return False


def test_rare_errors_on_equal_versions_stay_inside_the_budget() -> None:
    """At 0.1 % errors the first few errors decide: with the normal approximation, equal
    versions failed about 1.2 % of steps against the per-test budget of 0.25 %."""
    rng = np.random.default_rng(5)
    runs = 2000
    alarms = sum(_rare_error_false_alarm(rng, looks=40) for _ in range(runs))
    assert alarms / runs <= canary_test_alpha(CFG), alarms


def test_early_evidence_of_worse_never_licenses_a_clearly_better_pass() -> None:
    """The candidate's feedback is clearly lower at first (yet above the rail), then drifts a
    little above stable's: the evidence of "worse" is no evidence of "better"."""
    state = SequentialState()
    worse_first = CanaryWindow(
        RouteStats(1000, 0, 0.1, {1: 420, -1: 580}),
        RouteStats(1000, 0, 0.1, {1: 500, -1: 500}),
        "sim",
        60.0,
    )
    early, _ = _sequential_early(worse_first, state)
    assert early == "continue"  # within the 0.8x rail: no failure
    then_better = CanaryWindow(
        RouteStats(3000, 0, 0.1, {1: 1560, -1: 1440}),
        RouteStats(3000, 0, 0.1, {1: 1500, -1: 1500}),
        "sim",
        120.0,
    )
    early, reasons = _sequential_early(then_better, state)
    assert early != "pass", reasons
    # the same look on its own is no clear evidence either way
    assert _sequential_early(then_better, SequentialState())[0] == "continue"
