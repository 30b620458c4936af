"""The non-inferiority gate of a cheaper model (``flywheel release V --non-inferior MARGIN``): a
distilled student does not have to be better than stable, only no worse by more than a margin,
and cheaper. The question is one-sided, so is the test.

The score is the golden set's verified accuracy (each item's verifier, 0 or 1) when every item
has a verifier, else the gate's reward; both are read in points (x 100), so a margin of 2 means
two points of accuracy. With d = candidate - baseline per item, in points:

- H0: mean(d) <= -margin (worse by the margin or more), H1: mean(d) > -margin;
  one-sided paired t-test, p = P(T >= (mean(d) + margin) / se) with n - 1 degrees of freedom
  (every difference equal: p = 0 when that difference is above -margin, else 1);
- the interval is the two-sided ``1 - 2 alpha`` confidence interval of mean(d) (90 % for
  alpha 0.05): non-inferior exactly when its lower end lies above -margin (p < alpha);
  *inferior* when its upper end lies below -margin (worse by more than the margin, shown).

The decision, in order: a PII leak -> ``ROLLBACK``; fewer than ``min_samples`` pairs ->
``MANUAL_REVIEW`` (``ROLLBACK`` when already shown inferior); inferior -> ``ROLLBACK``; not
shown non-inferior -> ``MANUAL_REVIEW``; not shown cheaper (:class:`GateCost`: the one-sided
sign test over the gate's turns) -> ``MANUAL_REVIEW`` too (held for a person, never rejected:
no worse, and perhaps cheaper where the gate's turns cannot show it; resumed, the canary's
cost rail tests it on live traffic); a slice worse by more than ``slice_tolerance`` or a
failed check -> ``MANUAL_REVIEW``; else ``PROCEED_TO_SHADOW``. The KL check is reported but
decides nothing here: a student is its own base model, and its distance from the teacher is
what distillation minimised, not drift of a tuned policy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.serving.answers import Answer, AnswerSource, Messages
    from infra.settings import ReleaseSettings, RewardSettings
    from tasks.golden import GoldenItem
    from tasks.release.gate.drift import Check
    from tasks.release.verdict import Decision, Scored, SliceResult


@dataclass(kw_only=True)
class NonInferiority:
    """A one-sided paired non-inferiority test, in points (see the module docstring)."""

    n: int
    margin: float
    alpha: float
    mean_baseline: float
    mean_candidate: float
    mean_diff: float
    t_statistic: float | None
    p_value: float
    ci_low: float
    ci_high: float
    confidence: float  # of the two-sided interval: 1 - 2 alpha
    non_inferior: bool
    inferior: bool
    scale: str = "verified accuracy"

    def line(self) -> str:
        """The test in one line, for reasons and summaries."""
        return (
            f"{self.scale} {self.mean_baseline:.1f} -> {self.mean_candidate:.1f} "
            f"({self.mean_diff:+.1f} points, {self.confidence:.0%} CI "
            f"[{self.ci_low:+.1f}, {self.ci_high:+.1f}]; margin {self.margin:g}, "
            f"one-sided p={self.p_value:.3g})"
        )


def noninferiority_test(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    margin: float,
    alpha: float = 0.05,
    scale: str = "verified accuracy",
) -> NonInferiority:
    """The test of candidate vs baseline scores (0-1 each, paired by item), ``margin`` in
    points.

    Raises:
        ValueError: the samples differ in length or are empty.
    """
    import numpy as np
    from scipy import stats

    b = np.asarray(baseline, dtype=float) * 100
    c = np.asarray(candidate, dtype=float) * 100
    if b.shape != c.shape or b.size == 0:
        raise ValueError(f"paired samples must be non-empty and equal ({b.size}, {c.size})")
    d = c - b
    n, mean = int(d.size), float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    if sd > 0:
        se = sd / math.sqrt(n)
        t_stat = (mean + margin) / se
        p = float(stats.t.sf(t_stat, n - 1))
        half = float(stats.t.ppf(1 - alpha, n - 1)) * se
        lo, hi = mean - half, mean + half
    else:  # every difference the same: no doubt left about the mean
        t_stat = None
        p = 0.0 if mean > -margin else 1.0
        lo = hi = mean
    return NonInferiority(
        n=n,
        margin=margin,
        alpha=alpha,
        mean_baseline=float(b.mean()),
        mean_candidate=float(c.mean()),
        mean_diff=mean,
        t_statistic=t_stat,
        p_value=p,
        ci_low=lo,
        ci_high=hi,
        confidence=1 - 2 * alpha,
        non_inferior=p < alpha,
        inferior=hi < -margin,
        scale=scale,
    )


@dataclass(kw_only=True)
class GateCost:
    """Measured compute per request of both versions while they answered the golden set, and
    whether the candidate is cheaper with confidence. The gate asks both versions in turns
    (:func:`tasks.release.gate.gate.answer_alternating`); each turn's seconds compare the two on
    the same items at about the same moment. Cheaper: the candidate took less in more turns
    than chance explains (one-sided sign test, ``p_value`` below ``alpha``). Two versions that
    cost the same are then called cheaper in at most ``alpha`` of gates, not in half of them
    as a comparison of two means would, and a slow spell of the machine over a few turns moves
    a few signs, not the verdict."""

    baseline_s: float
    candidate_s: float
    turns: int = 0  # turns both versions answered
    cheaper_turns: int = 0  # of which the candidate took less time
    median_ratio: float | None = None  # the turns' median of candidate over stable
    p_value: float | None = None  # None: no turns (the means compared)
    alpha: float = 0.05

    @property
    def ratio(self) -> float:
        """Candidate's compute per request over stable's (below 1: cheaper)."""
        return self.candidate_s / self.baseline_s if self.baseline_s > 0 else math.inf

    @property
    def cheaper(self) -> bool:
        """Whether the candidate is shown cheaper (no turns: the means compared)."""
        if self.p_value is not None:
            return self.p_value < self.alpha
        return self.candidate_s < self.baseline_s


ALTERNATE_EVERY = 16  # golden items per turn of each version at most (ten turns at least)


def turn_size(items: int) -> int:
    """Golden items per turn: ``ALTERNATE_EVERY``, fewer so that there are ten turns."""
    return max(1, min(ALTERNATE_EVERY, items // 10))


def answer_alternating(
    baseline: AnswerSource, candidate: AnswerSource, requests: list[Messages], *, max_tokens: int
) -> tuple[list[Answer], list[Answer]]:
    """Both versions' answers, asked in turns of :func:`turn_size` items (who goes first
    alternating too), so a slow minute of the machine falls on both alike: the seconds each
    answer took are the cost the non-inferiority gate compares turn by turn."""
    base: list[Answer] = []
    cand: list[Answer] = []
    size = turn_size(len(requests))
    for turn, start in enumerate(range(0, len(requests), size)):
        part = requests[start : start + size]
        order = [(baseline, base), (candidate, cand)]
        for source, into in order if turn % 2 == 0 else order[::-1]:
            into.extend(source.answer(part, max_tokens=max_tokens))
    return base, cand


def gate_cost(
    base: Sequence[Answer], cand: Sequence[Answer], *, alpha: float = 0.05, turn: int = 16
) -> GateCost:
    """Mean seconds of generation per answered request of each version, and the sign test
    over the turns (``turn`` golden items each, in order) of the candidate taking less time
    than stable on the items both answered. Turns, not items, are the samples: the items of a
    turn share its batch and its moment of the machine's load."""
    from scipy import stats

    def mean(answers: Sequence[Answer]) -> float:
        ok = [a.latency_s for a in answers if not a.error]
        return sum(ok) / len(ok) if ok else math.inf

    ratios = []
    for start in range(0, min(len(base), len(cand)), turn):
        pairs = [
            (b.latency_s, c.latency_s)
            for b, c in zip(base[start : start + turn], cand[start : start + turn], strict=False)
            if not (b.error or c.error)
        ]
        b_s, c_s = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
        if b_s > 0 and c_s > 0 and b_s != c_s:
            ratios.append(c_s / b_s)
    cost = GateCost(baseline_s=mean(base), candidate_s=mean(cand), alpha=alpha)
    if ratios:
        cost.turns = len(ratios)
        cost.cheaper_turns = sum(r < 1 for r in ratios)
        cost.median_ratio = float(sorted(ratios)[len(ratios) // 2])
        cost.p_value = float(stats.binom.sf(cost.cheaper_turns - 1, cost.turns, 0.5))
    return cost


def golden_scores(
    items: Sequence[GoldenItem],
    answers: Sequence[str],
    rewards: Sequence[float],
    *,
    reward: RewardSettings,
) -> tuple[list[float], str]:
    """Each item's verified score when every item has a verdict, else its gate reward; and
    which of the two it is."""
    from tasks.golden import verified_scores

    verified = verified_scores(items, answers, reward=reward)
    if verified and all(v is not None for v in verified):
        return [float(v) for v in verified if v is not None], "verified accuracy"
    return list(rewards), "reward"


NOT_SHOWN_CHEAPER = (
    "held for a person: no worse than stable, but the gate could not show it cheaper. "
    "`flywheel resume` takes it on to shadow and the canary, whose cost rail rolls it back "
    "if live traffic shows it dearer than stable; `flywheel abort` drops it and keeps stable"
)


@dataclass(kw_only=True)
class NonInferiorGate:
    """The non-inferiority gate's decision, its reasons, its test and its cost."""

    decision: Decision
    reasons: list[str]
    test: NonInferiority
    cost: GateCost
    cheaper_required: bool = True

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the test and the cost (the report's ``noninferiority``; a resumed
        release reads its margin and ``cheaper_required`` back from it)."""
        cost = {**asdict(self.cost), "ratio": self.cost.ratio, "cheaper": self.cost.cheaper}
        return {"test": asdict(self.test), "cost": cost, "cheaper_required": self.cheaper_required}


def decide_noninferior(
    ni: NonInferiority,
    cost: GateCost,
    policy: ReleaseSettings,
    *,
    slices: Sequence[SliceResult] = (),
    checks: Sequence[Check] = (),
    require_cheaper: bool = True,
) -> tuple[Decision, list[str]]:
    """The decision (see the module docstring) and the reasons a reader sees
    (``require_cheaper`` off: the cost is reported, not required)."""
    from tasks.release.verdict import Decision

    leaks = [f"{c.name} check failed: {c.detail}" for c in checks if c.name == "pii_leak"]
    if leaks and any(c.status == "fail" for c in checks if c.name == "pii_leak"):
        return Decision.ROLLBACK, leaks
    worse = f"worse than stable by more than the margin: {ni.line()}"
    if ni.n < policy.min_samples:
        if ni.inferior:
            return Decision.ROLLBACK, [worse]
        return Decision.MANUAL_REVIEW, [f"only {ni.n} paired samples (< {policy.min_samples})"]
    if ni.inferior:
        return Decision.ROLLBACK, [worse]
    if not ni.non_inferior:
        return Decision.MANUAL_REVIEW, [
            f"non-inferiority not shown at alpha {ni.alpha:g}: {ni.line()}"
        ]
    bound = (
        f"; cheaper in {cost.cheaper_turns} of {cost.turns} turns, sign test p={cost.p_value:.3g}"
        if cost.p_value is not None
        else ""
    )
    dearer = (
        f"compute {1000 * cost.candidate_s:.2f} ms per request vs stable's "
        f"{1000 * cost.baseline_s:.2f} ms ({cost.ratio:.2f}x{bound})"
    )
    ok = f"non-inferior ({ni.line()}) and {'cheaper' if cost.cheaper else 'not cheaper'}: {dearer}"
    blockers = [
        f"slice {s.name} regressed by {-s.diff:.4f} (> {policy.slice_tolerance:g})"
        for s in slices
        if s.regressed
    ] + [
        f"{c.name} check failed: {c.detail}"
        for c in checks
        if c.status == "fail" and c.name != "kl"
    ]
    if require_cheaper and not cost.cheaper:  # no worse, maybe cheaper: a person decides
        not_shown = f"non-inferior ({ni.line()}) but not shown cheaper: {dearer}"
        return Decision.MANUAL_REVIEW, [not_shown, *blockers, NOT_SHOWN_CHEAPER]
    if blockers:
        return Decision.MANUAL_REVIEW, [f"{ok}, but:", *blockers]
    return Decision.PROCEED, [ok]


def noninferior_gate(
    scored: Scored,
    *,
    reward: RewardSettings,
    policy: ReleaseSettings,
    margin: float,
    checks: Sequence[Check],
    cheaper: bool = True,
) -> NonInferiorGate:
    """Score, test, measure and decide a non-inferiority release on the gate's scored answers
    (asked by :func:`answer_alternating`, whose turns :func:`gate_cost` compares)."""
    items, base, cand, rewards = scored.items, scored.base, scored.cand, scored.rewards
    b, scale = golden_scores(items, [a.text for a in base], rewards[0], reward=reward)
    c, other = golden_scores(items, [a.text for a in cand], rewards[1], reward=reward)
    if "reward" in (scale, other):  # one scale for both
        b, c, scale = list(rewards[0]), list(rewards[1]), "reward"
    ni = noninferiority_test(b, c, margin=margin, alpha=policy.alpha, scale=scale)
    cost = gate_cost(base, cand, alpha=policy.alpha, turn=turn_size(len(items)))
    decision, reasons = decide_noninferior(
        ni, cost, policy, slices=scored.slices, checks=checks, require_cheaper=cheaper
    )
    kl = [c for c in checks if c.name == "kl" and c.status == "fail"]
    if kl:
        reasons.append(f"kl reported, not a blocker for a student: {kl[0].detail}")
    return NonInferiorGate(
        decision=decision, reasons=reasons, test=ni, cost=cost, cheaper_required=cheaper
    )
