"""The canary rails' statistics on one step's numbers: a few votes are no regression, small
feedback samples counted exactly, alpha spent over the steps and tests, enough users on both
sides, and errors counted by users (heavy and retrying users, errors that cluster on users)."""

from __future__ import annotations

import pytest

from infra.gateway.metrics import GatewayMetrics
from infra.metrics.promql import CanaryWindow, RouteStats
from infra.metrics.promql_embedded import EmbeddedMetrics
from tasks.release.canary.canary import analyse_step
from tests.unit.test_release_canary import CFG, window


def test_a_few_votes_below_the_feedback_ratio_are_not_a_regression() -> None:
    """20 users a side: 11 up / 9 down against stable's 14 / 6 is 0.79x, a draw of the same
    version as often as not (exact p 0.26); 8 / 22 against 22 / 8 at 30 users a side is not
    (p 0.0003, under the canary's per-test level 0.05 x 0.8 / 20)."""
    noisy = analyse_step(
        window(RouteStats(100, 0, 0.2, {1: 11, -1: 9}), RouteStats(900, 0, 0.2, {1: 14, -1: 6})),
        CFG,
    )
    assert noisy.verdict == "pass", noisy.reasons
    assert noisy.evidence["feedback_ratio_vs_stable"] < 0.8
    assert any("not judged lower" in r for r in noisy.reasons)
    worse = analyse_step(
        window(RouteStats(100, 0, 0.2, {1: 8, -1: 22}), RouteStats(900, 0, 0.2, {1: 22, -1: 8})),
        CFG,
    )
    assert worse.verdict == "fail" and "feedback 0.27 = 0.36x" in worse.reasons[0]


def test_the_feedback_rail_counts_small_samples_exactly() -> None:
    """7 up of 20 against stable's 261 of 367 (0.71): a z-test read p 0.00033, the exact tail
    (Fisher's test here: no vote neutral) is 0.0012; 9 / 21 against 21 / 9 is 0.00206, over the
    per-test level 0.002 (the z-test's 0.001 was under it). Neutral votes count half."""
    from scipy.stats import hypergeom

    from tasks.release.canary.feedback_rail import exact_lower_p, lower_p

    p = lower_p(RouteStats(100, 0, 0.2, {1: 7, -1: 13}), RouteStats(900, 0, 0.2, {1: 261, -1: 106}))
    assert p == pytest.approx(hypergeom.cdf(7, 387, 268, 20)) and 0.0012 < p < 0.0013
    close = analyse_step(
        window(RouteStats(100, 0, 0.2, {1: 9, -1: 21}), RouteStats(900, 0, 0.2, {1: 21, -1: 9})),
        CFG,
    )
    assert close.verdict == "pass" and 0.002 < close.evidence["feedback_p"] < 0.0021
    # a neutral vote is half an up: two neutrals weigh as one up and one down
    assert exact_lower_p((1, 2, 3), (10, 0, 2)) < exact_lower_p((2, 0, 4), (10, 0, 2))
    assert exact_lower_p((0, 0, 3), (4, 0, 0)) == pytest.approx(1 / 35)  # Fisher: 3 down, 4 up


def test_the_rails_spend_alpha_over_the_canary_steps_and_tests() -> None:
    """5 / 15 users up against 14 / 6 (one-sided p 0.005): significant for a canary of one
    step (its five tests at 0.04 / 5 each), a draw for a canary of four steps (0.04 / 20 each):
    at alpha a test, a version no worse than stable would be rolled back by some step's draw
    up to steps x tests x alpha of the time."""
    votes = window(RouteStats(100, 0, 0.2, {1: 5, -1: 15}), RouteStats(900, 0, 0.2, {1: 14, -1: 6}))
    four_steps = analyse_step(votes, CFG)
    assert four_steps.verdict == "pass", four_steps.reasons
    assert 0.0025 < four_steps.evidence["feedback_p"] < 0.008
    assert any("not judged lower" in r for r in four_steps.reasons)
    one_step = analyse_step(votes, CFG.model_copy(update={"canary_steps": (100,)}))
    assert one_step.verdict == "fail" and "feedback 0.25 = 0.36x" in one_step.reasons[0]


def test_a_step_needs_enough_users_on_both_sides() -> None:
    """Many requests from few users are no comparison either (one heavy client a side)."""
    few_stable = analyse_step(
        window(RouteStats(100, 0, 0.2), RouteStats(900, 0, 0.2, users=3)), CFG
    )
    assert few_stable.verdict == "no_data"
    assert "stable served 3 users < 10 required" in few_stable.reasons[0]
    few_cand = analyse_step(window(RouteStats(100, 0, 0.2, users=4), RouteStats(900, 0, 0.2)), CFG)
    assert few_cand.verdict == "no_data"
    assert "candidate served 4 users < 10 required" in few_cand.reasons[0]
    policy = CFG.model_copy(update={"min_users_per_step": 3})
    assert (
        analyse_step(
            window(RouteStats(100, 0, 0.2), RouteStats(900, 0, 0.2, users=3)), policy
        ).verdict
        == "pass"
    )


def test_a_3x_error_regression_from_0_3_percent_fails_with_enough_users() -> None:
    """20,000 users a side, one request each: 0.9 % errors against stable's 0.3 %. The 1 %
    floor under stable's rate read it as 0.9x and passed it."""
    result = analyse_step(
        window(RouteStats(20_000, 180, 0.2), RouteStats(20_000, 60, 0.2)),
        CFG.model_copy(update={"min_requests_per_step": 50}),
    )
    assert result.verdict == "fail", result.reasons
    assert result.evidence["error_ratio_vs_stable"] == pytest.approx(3.0)


def _heavy_users_step(*, every_nth_canary: int, retrier: bool = False) -> CanaryWindow:
    """100 users a side with 60 requests each in one step, through the gateway's voice series:
    stable's fail one request in 50, the candidate's one in ``every_nth_canary``; ``retrier``:
    one more candidate user whose 60 requests all fail (a script retrying a bad input)."""
    metrics = GatewayMetrics()
    reader = EmbeddedMetrics(lambda: metrics.render().decode(), clock=lambda: 0.0)
    since = reader.mark()
    epoch = ("r1", "v1", "canary", 50.0, 2)
    sides = [("v0", "stable", 50, range(100)), ("v1", "canary", every_nth_canary, range(100, 200))]
    if retrier:
        sides.append(("v1", "canary", 1, range(200, 201)))
    for model, route, nth, users in sides:
        for user in users:
            for i in range(60):
                error = (i + user) % nth == 0
                metrics.observe(
                    model=model, route=route, seconds=0.1, error=error, voter=user, epoch=epoch
                )
    return reader.read(candidate="v1", stable="v0", since=since)


def test_errors_of_heavy_users_do_not_saturate_and_one_retrying_user_is_one_user() -> None:
    """Users with 60 requests a step: at 2 % errors every one of them meets one on either
    version, so "the share of users who met an error" read a 3x regression (6.7 %) as 1.0x and
    passed it. The rail compares error rates; one user retrying a failing request 60 times is
    still one user."""
    regressed = _heavy_users_step(every_nth_canary=15)
    assert regressed.candidate.error_users / regressed.candidate.users < 1.2 * (
        regressed.stable.error_users / regressed.stable.users
    )

    result = analyse_step(regressed, CFG)

    assert result.verdict == "fail", result.reasons
    assert result.evidence["error_ratio_vs_stable"] == pytest.approx(10 / 3, rel=0.05)
    same_but_one = analyse_step(_heavy_users_step(every_nth_canary=50, retrier=True), CFG)
    assert same_but_one.verdict == "pass", same_but_one.reasons


def test_errors_that_cluster_on_users_count_as_fewer_trials() -> None:
    """200 users a side, 90 requests each, 2 % errors on average: spread as chance spreads
    them, nearly every user meets one or two (the design effect is 1: requests are the
    trials); concentrated on a third of the users (their prompts fail more), the same errors
    are worth fewer independent trials, and the same 1.6x difference is no longer significant."""
    import random

    from tasks.release.canary.error_rail import more_errors_p
    from tasks.release.canary.units import design_effect

    def side(rate: float, *, clustered: bool, seed: int) -> RouteStats:
        rng = random.Random(seed)
        errors = error_users = 0
        for _ in range(200):
            user_rate = (3 * rate if rng.random() < 1 / 3 else 0.0) if clustered else rate
            mine = sum(rng.random() < user_rate for _ in range(90))
            errors, error_users = errors + mine, error_users + (mine > 0)
        return RouteStats(18_000, errors, 0.2, users=200, error_users=error_users)

    spread = side(0.032, clustered=False, seed=1), side(0.02, clustered=False, seed=2)
    clustered = side(0.032, clustered=True, seed=1), side(0.02, clustered=True, seed=2)
    assert design_effect(*spread) == pytest.approx(1.0, abs=0.15)
    assert design_effect(*clustered) > 2.5
    assert more_errors_p(*spread) < 0.002 < more_errors_p(*clustered)
