"""Is the canary's feedback worse, or did a few votes fall its way?

The feedback guard rail compares mean feedback on the reward's scale (thumbs up 1, neutral 0.5,
down 0) once both versions have ``min_feedback`` events. At 20 votes a side the means move by
0.1 on a few votes: a candidate at 0.55 against stable's 0.70 (0.79x) is as likely a draw of
the same version as a worse one. So a mean below ``feedback_ratio_min`` x stable also has to be
significantly lower: a one-sided two-sample z-test with the variance pooled over both versions
(as under "no difference", the way the sequential test pools it). The rail looks once per
canary step, at the canary's per-test level (:func:`~tasks.release.sequential.canary_test_alpha`:
``alpha`` split over every step's tests, Bonferroni): at ``alpha`` each, a version no worse than
stable would be rolled back by some step's draw up to steps x alpha of the time. Votes are
users' (each user's first vote in the step, :mod:`infra.gateway.voices`), so one user's 200
down-votes are one vote.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tasks.release.units import pooled_feedback
from tasks.release.verdict import Judged

if TYPE_CHECKING:
    from infra.promql import RouteStats
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


def lower_p(candidate: RouteStats, stable: RouteStats) -> float:
    """One-sided p-value that the candidate's mean feedback is below stable's, the variance
    pooled over both versions' events (1.0 when every vote is the same)."""
    if (pooled := pooled_feedback(candidate, stable)) is None:
        return 1.0
    nc, mc, ns, ms, variance = pooled
    variance *= (nc + ns) / (nc + ns - 1)  # the sample variance of all events
    if variance <= 0:
        return 1.0
    z = (ms - mc) / math.sqrt(variance * (1 / nc + 1 / ns))
    return 0.5 * math.erfc(z / math.sqrt(2))
