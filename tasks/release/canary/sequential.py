"""The canary's always-valid comparison: mixture sequential probability ratio tests (mSPRT,
Johari, Pekelis & Walsh, "Always valid inference", 2017/2022) of the candidate against the
stable version on errors and on mean feedback, looked at on every poll of a step.

Each measure keeps two always-valid p-values, one per direction: ``p = min over looks of
1 / Lambda`` with ``Lambda`` a mixture likelihood ratio over effects in that direction only
(a non-negative martingale when the versions are equal, so however often the canary looks, the
chance that p ever drops below ``alpha`` is at most ``alpha``). Evidence that the candidate
was worse early in a step therefore never licenses a "clearly better" pass later: it only ever
entered the "worse" p-value.

- **Errors** are counts, often rare (request-level, each user's weight bounded:
  :mod:`tasks.release.canary.units`): with the versions' errors taken together fixed, each is the
  candidate's with its share of the requests when the versions are equal. The test is a
  binomial mSPRT on that share, exact for small counts, mixed over rate ratios ``rho``
  (``RATIOS`` x ``error_ratio_max``, and their inverses for "better"): 2 candidate errors
  against 0 at the 5 % step (one request a user) gives p = 0.08, where the normal
  approximation it replaces gave 0.001 and failed the step (Fisher's exact test: 0.0025).
- **Feedback** is a difference of means ``d`` with variance ``v`` (normal approximation),
  mixed over ``theta ~ N(0, tau^2)`` restricted to one sign (a half-normal):

      Lambda_+ = 2 Lambda Phi(d tau / sqrt(v (v + tau^2))),
      Lambda = sqrt(v / (v + tau^2)) exp(d^2 tau^2 / (2 v (v + tau^2)))

  (``Lambda``: the two-sided mixture, :func:`msprt_lambda`).
  ``tau`` is the effect worth detecting, stable's feedback to the rail
  (``feedback_ratio_min`` x stable).

What a step does with it (:func:`sequential_verdict`):

- beyond a guard rail and clearly worse (p_worse < :func:`canary_test_alpha`) on either
  measure: the step fails at once;
- clearly better (p_better < ``sequential_alpha``) on one, not leaning worse on the other, with
  ``min_requests_per_step`` requests and the guard rails passing: the step passes at once;
- otherwise the step runs to its horizon (``analysis_interval_s``) and the guard rails
  (:func:`~tasks.release.canary.canary.analyse_step`) decide, the sequential test still able to fail it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tasks.release.canary.rails import RAILS
from tasks.release.canary.units import paired_error_evidence, pooled_feedback

if TYPE_CHECKING:
    from infra.metrics.promql import CanaryWindow, RouteStats
    from infra.settings import ReleaseSettings

Direction = Literal["worse", "better", "none"]
RATIOS = (1.0, 1.5, 2.0, 3.0, 5.0)  # x error_ratio_max: the error-rate ratios mixed over


def msprt_lambda(diff: float, variance: float, tau: float) -> float:
    """The mixture likelihood ratio of a difference ``diff`` with variance ``variance`` under a
    ``N(0, tau^2)`` mixture over the effect; 1.0 when there is no information yet."""
    if variance <= 0 or tau <= 0 or not math.isfinite(diff):
        return 1.0
    t2 = tau * tau
    exponent = diff * diff * t2 / (2 * variance * (variance + t2))
    return math.sqrt(variance / (variance + t2)) * math.exp(min(exponent, 700.0))


def one_sided_lambda(diff: float, variance: float, tau: float) -> float:
    """:func:`msprt_lambda` with the mixture restricted to effects of ``diff > 0``'s sign (a
    half-normal): large only for positive ``diff``; 1.0 when there is no information yet."""
    if variance <= 0 or tau <= 0 or not math.isfinite(diff):
        return 1.0
    from scipy.stats import norm

    side = norm.cdf(diff * tau / math.sqrt(variance * (variance + tau * tau)))
    return 2.0 * msprt_lambda(diff, variance, tau) * float(side)


def share_lambda(events: float, total: float, share: float, ratios: tuple[float, ...]) -> float:
    """The mixture likelihood ratio that ``events`` of ``total`` events fell on a side whose
    share of the trials is ``share``, against that side's rate being ``rho`` times the other's
    (each of ``ratios`` equally likely); 1.0 when there is nothing to weigh."""
    if total <= 0 or not 0 < share < 1:
        return 1.0
    logs = []
    for rho in ratios:
        alt = rho * share / (rho * share + 1 - share)
        logs.append(
            events * math.log(alt / share) + (total - events) * math.log((1 - alt) / (1 - share))
        )
    top = max(logs)
    return math.exp(min(top, 700.0)) * sum(math.exp(x - top) for x in logs) / len(logs)


@dataclass(kw_only=True)
class Measure:
    """One measure's evidence at one look."""

    name: str  # "error_ratio" | "feedback"
    candidate: float
    stable: float
    n_candidate: float
    n_stable: float
    p_worse: float  # always valid: the smallest 1 / Lambda_worse over every look of the step
    p_better: float  # likewise for "the candidate is better"
    direction: Direction  # where the candidate leans now (worse / better / none)

    @property
    def p_value(self) -> float:
        """Always valid for a difference either way (the two one-sided p-values, Bonferroni)."""
        return min(1.0, 2 * min(self.p_worse, self.p_better))


@dataclass
class SequentialState:
    """The running minimum of each measure's p-value per direction over the looks of one
    step."""

    p_values: dict[str, float] = field(default_factory=dict)
    looks: int = 0

    def update(self, name: str, likelihood_ratio: float) -> float:
        """Fold a look's likelihood ratio into ``name``'s always-valid p-value (``name``: a
        measure and a direction, e.g. ``error_ratio:worse``); returns it."""
        p = min(self.p_values.get(name, 1.0), 1.0 / max(likelihood_ratio, 1e-300))
        self.p_values[name] = p
        return p


# the sequential failure tests of a step: errors and feedback, "worse" only ("better" tests can
# pass a step early, never roll it back)
SEQUENTIAL_FAILURE_TESTS = ("error_ratio", "feedback")
# failure tests of every step: each guard rail that always runs (:data:`RAILS`: errors,
# latency and feedback at the horizon) and the sequential ones
TESTS_PER_STEP = sum(rail.tests for rail in RAILS if rail.when is None) + len(
    SEQUENTIAL_FAILURE_TESTS
)


def tests_per_step(policy: ReleaseSettings) -> int:
    """The failure tests one canary step runs: ``TESTS_PER_STEP``, and those of each rail a
    release turns on (the cost rail of a non-inferiority release, ``cost_ratio_max``)."""
    return TESTS_PER_STEP + sum(
        rail.tests for rail in RAILS if rail.when is not None and rail.when(policy)
    )


def shadow_test_alpha(policy: ReleaseSettings) -> float:
    """The one-sided level of the shadow phase's "worse than stable": its share of ``alpha``
    (``shadow_alpha_share``)."""
    return policy.alpha * policy.shadow_alpha_share


def canary_test_alpha(policy: ReleaseSettings) -> float:
    """The significance level of each of a canary's failure tests: what the shadow phase left
    of ``alpha``, split evenly over the steps and the tests of each step (Bonferroni), so a
    version no worse than stable is rolled back at most ``alpha`` of the time by the shadow
    phase and the canary together."""
    rest = policy.alpha * (1 - policy.shadow_alpha_share)
    return rest / (max(1, len(policy.canary_steps)) * tests_per_step(policy))


def _errors(c: RouteStats, s: RouteStats, policy: ReleaseSettings) -> tuple[float, ...] | None:
    """(candidate rate, stable rate, requests, requests, Lambda_worse, Lambda_better) with
    each user's errors bounded (:func:`~tasks.release.canary.units.error_evidence`); None when a side
    has no request."""
    (ec, nc), (es, ns) = paired_error_evidence(c, s)
    if nc <= 0 or ns <= 0:
        return None
    share = nc / (nc + ns)
    rail = max(policy.error_ratio_max, 1.1)
    worse = tuple(rail * r for r in RATIOS)
    lam_worse = share_lambda(ec, ec + es, share, worse)
    lam_better = share_lambda(ec, ec + es, share, tuple(1 / r for r in worse))
    return ec / nc, es / ns, nc, ns, lam_worse, lam_better


def _feedback(c: RouteStats, s: RouteStats, policy: ReleaseSettings) -> tuple[float, ...] | None:
    """(candidate mean, stable mean, events, events, Lambda_worse, Lambda_better); None when a
    side has no feedback."""
    if (pooled := pooled_feedback(c, s)) is None:
        return None
    nc, mc, ns, ms, pooled_variance = pooled
    floor = 1.0 / 12  # a uniform score's variance: feedback all alike is still not certainty
    variance = max(pooled_variance, floor) * (1 / nc + 1 / ns)
    tau = max(ms * (1 - policy.feedback_ratio_min), 0.05)
    diff = mc - ms  # lower feedback is worse
    lam_worse = one_sided_lambda(-diff, variance, tau)
    return mc, ms, nc, ns, lam_worse, one_sided_lambda(diff, variance, tau)


def measure(window: CanaryWindow, policy: ReleaseSettings, state: SequentialState) -> list[Measure]:
    """Both measures at this look (a measure without data on either side is left out); the
    running p-values in ``state``, one per measure and direction, are updated."""
    out = []
    state.looks += 1
    for name, compute, worse_sign in (("error_ratio", _errors, 1), ("feedback", _feedback, -1)):
        values = compute(window.candidate, window.stable, policy)
        if values is None:
            continue
        cand, stable, n_c, n_s, lam_worse, lam_better = values
        lean = (cand - stable) * worse_sign
        direction: Direction = "worse" if lean > 0 else "better" if lean < 0 else "none"
        out.append(
            Measure(
                name=name,
                candidate=cand,
                stable=stable,
                n_candidate=n_c,
                n_stable=n_s,
                p_worse=state.update(f"{name}:worse", lam_worse),
                p_better=state.update(f"{name}:better", lam_better),
                direction=direction,
            )
        )
    return out


Early = Literal["fail", "pass", "continue"]


def sequential_verdict(
    measures: list[Measure],
    *,
    alpha: float | None,
    fail_alpha: float,
    beyond_rail: set[str],
    enough_requests: bool,
    guard_rails_pass: bool,
) -> tuple[Early, list[str]]:
    """What this look decides (see the module docstring) and why; ``alpha`` None: never an
    early pass."""
    worse = [
        m
        for m in measures
        if m.direction == "worse" and m.p_worse < fail_alpha and m.name in beyond_rail
    ]
    if worse:
        return "fail", [f"sequential test: {describe(m)} (clearly worse)" for m in worse]
    better = [
        m for m in measures if alpha is not None and m.direction == "better" and m.p_better < alpha
    ]
    leaning_worse = any(m.direction == "worse" for m in measures)
    if better and enough_requests and guard_rails_pass and not leaning_worse:
        return "pass", [f"sequential test: {describe(m)} (clearly better)" for m in better]
    return "continue", [f"sequential test: {describe(m)}" for m in measures]


def describe(m: Measure) -> str:
    """A measure's comparison in one line."""
    what = "error ratio" if m.name == "error_ratio" else "feedback"
    fmt = "{:.2%}" if m.name == "error_ratio" else "{:.2f}"
    unit = " requests" if m.name == "error_ratio" else " votes"
    return (
        f"{what} {fmt.format(m.candidate)} over {m.n_candidate:.0f}{unit} vs stable "
        f"{fmt.format(m.stable)} over {m.n_stable:.0f}{unit}, always-valid "
        f"p={m.p_worse:.3g} worse, {m.p_better:.3g} better"
    )


def evidence(measures: list[Measure], state: SequentialState) -> dict[str, Any]:
    """JSON-ready evidence of the sequential test for the step's transition."""
    return {
        "looks": state.looks,
        "measures": [asdict(m) | {"p_value": m.p_value} for m in measures],
    }
