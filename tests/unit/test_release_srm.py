"""Sample ratio mismatch: a canary step passes only on a split of users that matches its weight
(fake clock and in-memory metrics)."""

from __future__ import annotations

from infra.metrics.promql import CanaryWindow, RouteStats
from infra.routing import StoreRouting
from tasks.release.canary.canary import analyse_step
from tasks.release.machine.machine import Step, conclude
from tests.unit.test_release_canary import CFG, FakeClock, FakeMetrics, routing, watch, window

__all__ = ["routing"]  # the fixture, used by name


def test_a_split_that_does_not_match_the_weight_holds_the_step(routing: StoreRouting) -> None:
    """At a 5 % step, 30 % of the users reached the candidate (a client choosing its version, a
    leaking bucket): the rails would pass it, but nothing on such a split can be trusted. The
    step waits for its deadline, then the release holds for a person."""
    leaky = analyse_step(
        window(RouteStats(300, 3, 0.1, users=300), RouteStats(700, 7, 0.1, users=700)),
        CFG,
        weight=5,
    )
    assert leaky.verdict == "no_data"
    assert leaky.reasons[0].startswith("sample ratio mismatch: the candidate served 300 of 1000")
    assert leaky.evidence["sample_ratio_mismatch"]["p_value"] < CFG.srm_alpha
    # the same counts at the weight they match pass; without a weight nothing is checked
    assert analyse_step(window(*leaky_stats()), CFG, weight=30).verdict == "pass"
    assert analyse_step(window(*leaky_stats()), CFG).verdict == "pass"
    off = CFG.model_copy(update={"srm_alpha": 0.0})
    assert analyse_step(window(*leaky_stats()), off, weight=5).verdict == "pass"

    class Leaky(FakeMetrics):
        def read(self, **_: object) -> CanaryWindow:
            return CanaryWindow(*leaky_stats(), "fake", self.clock.now())

    clock = FakeClock()
    result = watch(routing, clock, Leaky(clock))
    assert result.verdict == "no_data" and "sample ratio mismatch" in result.reasons[0]
    state = conclude(
        routing, None, "v1", at=Step("canary"), result=result, policy=CFG, actor="test"
    )
    assert (state.phase, state.weight, state.stable) == ("held", 0.0, "v0")


def leaky_stats() -> tuple[RouteStats, RouteStats]:
    return RouteStats(300, 3, 0.1, users=300), RouteStats(700, 7, 0.1, users=700)


def test_a_mismatched_split_never_hides_a_failing_candidate() -> None:
    """The check holds passes only: a candidate failing its users is rolled back whatever the
    split (a crash that drops the candidate's users is itself a mismatch)."""
    failing = analyse_step(
        window(RouteStats(300, 90, 0.1, users=300), RouteStats(700, 7, 0.1, users=700)),
        CFG,
        weight=5,
    )
    assert failing.verdict == "fail" and failing.reasons[0].startswith("errors: 30.00%")


def test_a_split_that_matches_the_weight_rarely_holds() -> None:
    """A/A: 2,000 steps whose users are routed by chance at each canary weight; the check holds
    about ``srm_alpha`` of them (0.1 %), whatever the weight or the number of users."""
    import numpy as np

    rng = np.random.default_rng(11)
    held = total = 0
    for weight in (5.0, 25.0, 50.0, 90.0):
        for users in rng.integers(400, 5000, size=500):
            cand = float(rng.binomial(users, weight / 100))
            c = RouteStats(max(cand, 50), 0, 0.1, users=cand)
            s = RouteStats(users - cand, 0, 0.1, users=users - cand)
            result = analyse_step(window(c, s), CFG, weight=weight)
            held += "sample_ratio_mismatch" in result.evidence
            total += 1
    assert total == 2000 and held / total <= 0.005, held
