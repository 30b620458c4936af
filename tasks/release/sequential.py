"""The canary's always-valid comparison: a mixture sequential probability ratio test (mSPRT,
Johari, Pekelis & Walsh, "Always valid inference", 2017/2022) of the candidate against the
stable version on error rate and on mean feedback, looked at on every poll of a step.

For a difference of means ``theta`` estimated as ``d`` with variance ``v`` (normal
approximation), the mixture likelihood ratio of H1 (``theta ~ N(0, tau^2)``) against H0
(``theta = 0``) is

    Lambda = sqrt(v / (v + tau^2)) * exp(d^2 tau^2 / (2 v (v + tau^2)))

and ``p = min over looks of 1 / Lambda`` is an always-valid p-value: however often the canary
looks, the chance that p ever drops below ``alpha`` when the versions are equal is at most
``alpha``, so looking on every poll cannot peek its way to a false verdict. ``tau`` is the
effect worth detecting: the distance from the stable value to the guard rail
(``error_ratio_max`` x stable error ratio, ``feedback_ratio_min`` x stable feedback).

What a step does with it (:func:`sequential_verdict`):

- beyond a guard rail and clearly worse (p < :func:`canary_test_alpha`) on either measure: the
  step fails at once;
- clearly better (p < ``sequential_alpha``) on one, not leaning worse on the other, with
  ``min_requests_per_step`` requests and the guard rails passing: the step passes at once;
- otherwise the step runs to its horizon (``analysis_interval_s``) and the guard rails
  (:func:`~tasks.release.canary.analyse_step`) decide, the sequential test still able to fail it.

Errors are counted per user (the share of users who met an error, :mod:`infra.gateway.voices`),
so the trials the test assumes independent are users, not one user's retries.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from infra.promql import CanaryWindow, RouteStats
    from infra.settings import ReleaseSettings

Direction = Literal["worse", "better", "none"]


def msprt_lambda(diff: float, variance: float, tau: float) -> float:
    """The mixture likelihood ratio of a difference ``diff`` with variance ``variance`` under a
    ``N(0, tau^2)`` mixture over the effect; 1.0 when there is no information yet."""
    if variance <= 0 or tau <= 0 or not math.isfinite(diff):
        return 1.0
    t2 = tau * tau
    exponent = diff * diff * t2 / (2 * variance * (variance + t2))
    return math.sqrt(variance / (variance + t2)) * math.exp(min(exponent, 700.0))


@dataclass(kw_only=True)
class Measure:
    """One measure's evidence at one look."""

    name: str  # "error_ratio" | "feedback"
    candidate: float
    stable: float
    n_candidate: float
    n_stable: float
    likelihood_ratio: float
    p_value: float  # always valid: the smallest 1 / Lambda over every look of the step
    direction: Direction  # where the candidate leans (worse / better / none)


@dataclass
class SequentialState:
    """The running minimum of each measure's p-value over the looks of one step."""

    p_values: dict[str, float] = field(default_factory=dict)
    looks: int = 0

    def update(self, name: str, likelihood_ratio: float) -> float:
        """Fold a look's likelihood ratio into ``name``'s always-valid p-value; returns it."""
        p = min(self.p_values.get(name, 1.0), 1.0 / max(likelihood_ratio, 1e-300))
        self.p_values[name] = p
        return p


TESTS_PER_STEP = 5  # errors and feedback at the horizon and sequentially, latency at the horizon


def canary_test_alpha(policy: ReleaseSettings) -> float:
    """The significance level of each of a canary's failure tests: ``alpha`` split evenly over
    its steps and the tests of each step (Bonferroni), so a version no worse than stable is
    rolled back at most ``alpha`` of the time over the whole canary."""
    return policy.alpha / (max(1, len(policy.canary_steps)) * TESTS_PER_STEP)


def _errors(c: RouteStats, s: RouteStats, policy: ReleaseSettings) -> tuple[float, ...] | None:
    if c.users <= 0 or s.users <= 0:
        return None
    pc, ps = c.error_users / c.users, s.error_users / s.users
    pooled = (c.error_users + s.error_users) / (c.users + s.users)
    pooled = min(max(pooled, 1.0 / (c.users + s.users)), 1 - 1e-9)
    variance = pooled * (1 - pooled) * (1 / c.users + 1 / s.users)
    tau = max(ps, policy.error_floor) * max(policy.error_ratio_max - 1, 0.1)
    return pc, ps, c.users, s.users, pc - ps, variance, tau


FEEDBACK_SCALE = {1: 1.0, 0: 0.5, -1: 0.0}  # feedback value -> the reward's scale


def _feedback_moments(stats: RouteStats) -> tuple[float, float, float]:
    """(events, mean, variance) of feedback on the reward's scale (up 1, neutral 0.5, down 0)."""
    n = stats.feedback_count
    if n <= 0:
        return 0.0, 0.0, 0.0
    mean = sum(FEEDBACK_SCALE.get(k, 0.5) * w for k, w in stats.feedback.items()) / n
    second = sum(FEEDBACK_SCALE.get(k, 0.5) ** 2 * w for k, w in stats.feedback.items()) / n
    return n, mean, max(second - mean * mean, 0.0)


def pooled_feedback(
    c: RouteStats, s: RouteStats
) -> tuple[float, float, float, float, float] | None:
    """(candidate events, mean, stable events, mean, variance of all events as one sample): the
    variance under H0, one feedback distribution for both versions. Each side's own variance
    made two small unanimous samples look certain (3 thumbs down against 4 up: p = 0.013, below
    Fisher's exact 0.029; pooled: p = 0.53). None when a side has no feedback."""
    nc, mc, vc = _feedback_moments(c)
    ns, ms, vs = _feedback_moments(s)
    if nc <= 0 or ns <= 0:
        return None
    n = nc + ns
    mean = (nc * mc + ns * ms) / n
    second = (nc * (vc + mc * mc) + ns * (vs + ms * ms)) / n
    return nc, mc, ns, ms, max(second - mean * mean, 0.0)


def _feedback(c: RouteStats, s: RouteStats, policy: ReleaseSettings) -> tuple[float, ...] | None:
    if (pooled := pooled_feedback(c, s)) is None:
        return None
    nc, mc, ns, ms, pooled_variance = pooled
    floor = 1.0 / 12  # a uniform score's variance: feedback all alike is still not certainty
    variance = max(pooled_variance, floor) * (1 / nc + 1 / ns)
    tau = max(ms * (1 - policy.feedback_ratio_min), 0.05)
    return mc, ms, nc, ns, mc - ms, variance, tau


def measure(window: CanaryWindow, policy: ReleaseSettings, state: SequentialState) -> list[Measure]:
    """Both measures at this look (a measure without data on either side is left out); the
    running p-values in ``state`` are updated."""
    out = []
    state.looks += 1
    for name, compute, worse_sign in (("error_ratio", _errors, 1), ("feedback", _feedback, -1)):
        values = compute(window.candidate, window.stable, policy)
        if values is None:
            continue
        cand, stable, n_c, n_s, diff, variance, tau = values
        lam = msprt_lambda(diff, variance, tau)
        p = state.update(name, lam)
        direction: Direction = "none"
        if diff * worse_sign > 0:
            direction = "worse"
        elif diff * worse_sign < 0:
            direction = "better"
        out.append(
            Measure(
                name=name,
                candidate=cand,
                stable=stable,
                n_candidate=n_c,
                n_stable=n_s,
                likelihood_ratio=lam,
                p_value=p,
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
        if m.direction == "worse" and m.p_value < fail_alpha and m.name in beyond_rail
    ]
    if worse:
        return "fail", [f"sequential test: {describe(m)} (clearly worse)" for m in worse]
    better = [
        m for m in measures if alpha is not None and m.direction == "better" and m.p_value < alpha
    ]
    leaning_worse = any(m.direction == "worse" for m in measures)
    if better and enough_requests and guard_rails_pass and not leaning_worse:
        return "pass", [f"sequential test: {describe(m)} (clearly better)" for m in better]
    return "continue", [f"sequential test: {describe(m)}" for m in measures]


def describe(m: Measure) -> str:
    """A measure's comparison in one line."""
    what = "error ratio" if m.name == "error_ratio" else "feedback"
    fmt = "{:.2%}" if m.name == "error_ratio" else "{:.2f}"
    return (
        f"{what} {fmt.format(m.candidate)} over {m.n_candidate:.0f} vs stable "
        f"{fmt.format(m.stable)} over {m.n_stable:.0f}, always-valid p={m.p_value:.3g}"
    )


def evidence(measures: list[Measure], state: SequentialState) -> dict[str, Any]:
    """JSON-ready evidence of the sequential test for the step's transition."""
    return {"looks": state.looks, "measures": [asdict(m) for m in measures]}
