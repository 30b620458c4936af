"""Is the canary's feedback worse, or did a few votes fall its way?

The feedback guard rail compares mean feedback on the reward's scale (thumbs up 1, neutral 0.5,
down 0) once both versions have ``min_feedback`` events. At 20 votes a side the means move by
0.1 on a few votes: a candidate at 0.55 against stable's 0.70 (0.79x) is as likely a draw of
the same version as a worse one. So a mean below ``feedback_ratio_min`` x stable also has to be
significantly lower: a one-sided exact test of how the votes split between the versions given
all of them (a permutation test: which of the pooled votes the candidate's users drew, thumbs
up 1, neutral 0.5, down 0; Fisher's exact test where no vote is neutral). A z-test with the
variance pooled, used before, read 7 up of 20 against stable's 71 % of 367 as p = 0.00033,
where the exact tail is 0.0012: at the canary's per-test level of 0.002 the normal curve's
tail is several times too thin for 20 votes, and 2 of 60 identical releases of 1,000 users
were rolled back on the feedback rail's first step. The rail looks once per
canary step, at the canary's per-test level (:func:`~tasks.release.canary.sequential.canary_test_alpha`:
``alpha`` split over every step's tests, Bonferroni): at ``alpha`` each, a version no worse than
stable would be rolled back by some step's draw up to steps x alpha of the time. Votes are
users' (each user's first vote in the step, :mod:`infra.gateway.voices`), so one user's 200
down-votes are one vote.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tasks.release.canary.units import pooled_feedback
from tasks.release.verdict import Judged

if TYPE_CHECKING:
    from infra.metrics.promql import RouteStats
    from infra.settings import ReleaseSettings


def judge_feedback(
    candidate: RouteStats, stable: RouteStats, policy: ReleaseSettings, *, level: float
) -> Judged:
    """The feedback guard rail (failed: below the ratio and significantly lower); a note,
    never a failure, when there is too little feedback to judge."""
    cf, sf = candidate.feedback_score, stable.feedback_score
    nc, ns = candidate.feedback_count, stable.feedback_count
    if nc < policy.min_feedback or ns < policy.min_feedback or not sf:
        note = (
            f"feedback not judged: {nc:.0f} candidate / {ns:.0f} stable users' votes "
            f"(< {policy.min_feedback})"
        )
        return Judged(line=note, failed=False, evidence={})
    ratio = (cf or 0.0) / sf
    evidence: dict[str, Any] = {"feedback_ratio_vs_stable": ratio}
    line = f"feedback {cf:.2f} = {ratio:.2f}x stable {sf:.2f} (min {policy.feedback_ratio_min:g}x)"
    failed = ratio < policy.feedback_ratio_min
    if failed:
        p = lower_p(candidate, stable)
        evidence["feedback_p"] = p
        failed = p < level
        line += f"; one-sided p={p:.2g}" + ("" if failed else ": not judged lower")
    return Judged(line=line, failed=failed, evidence=evidence)


EXACT_MAX_VOTES = 2_000  # a side's votes up to which the exact test is enumerated


def lower_p(candidate: RouteStats, stable: RouteStats) -> float:
    """One-sided p-value that the candidate's mean feedback is below stable's: exact
    (:func:`exact_lower_p`) while the candidate has at most ``EXACT_MAX_VOTES`` votes, beyond
    that a z-test with the variance pooled over both versions' votes (1.0 when every vote is
    the same)."""
    votes = [_votes(candidate), _votes(stable)]
    if sum(votes[0]) <= EXACT_MAX_VOTES:
        return exact_lower_p(*votes)
    if (pooled := pooled_feedback(candidate, stable)) is None:
        return 1.0
    nc, mc, ns, ms, variance = pooled
    variance *= (nc + ns) / (nc + ns - 1)  # the sample variance of all events
    if variance <= 0:
        return 1.0
    z = (ms - mc) / math.sqrt(variance * (1 / nc + 1 / ns))
    return 0.5 * math.erfc(z / math.sqrt(2))


def _votes(stats: RouteStats) -> tuple[int, int, int]:
    """(up, neutral, down) users' votes, whole (Prometheus extrapolates counts)."""
    return tuple(round(max(stats.feedback.get(v, 0.0), 0.0)) for v in (1, 0, -1))  # type: ignore[return-value]


def exact_lower_p(candidate: tuple[int, int, int], stable: tuple[int, int, int]) -> float:
    """P(the candidate's score is this low or lower) when its ``n`` votes are drawn at random
    from both versions' votes together (multivariate hypergeometric over up, neutral and down;
    the score counts an up as 2 and a neutral as 1, whole numbers)."""
    import numpy as np
    from scipy.special import gammaln

    n = sum(candidate)
    pool = [c + s for c, s in zip(candidate, stable, strict=True)]
    total = sum(pool)
    if n <= 0 or n >= total:
        return 1.0
    observed = 2 * candidate[0] + candidate[1]

    def log_choose(a: float, b: np.ndarray) -> np.ndarray:
        return gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)

    up = np.arange(0, min(n, pool[0]) + 1)
    p = 0.0
    for neutral in range(0, min(n, pool[1]) + 1):
        down = n - neutral - up
        ok = (down >= 0) & (down <= pool[2]) & (2 * up + neutral <= observed)
        if not ok.any():
            continue
        u, d = up[ok], down[ok]
        log_p = (
            log_choose(pool[0], u)
            + log_choose(pool[1], np.full_like(u, neutral))
            + log_choose(pool[2], d)
            - log_choose(total, np.array([n]))
        )
        p += float(np.exp(log_p).sum())
    return min(1.0, p)
