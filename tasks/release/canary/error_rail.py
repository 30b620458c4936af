"""The canary's error rail: the candidate's request-level error rate, each user's weight
bounded (:mod:`tasks.release.canary.units`), against stable's over the same interval, failed only when
above the ratio and significantly higher (a one-sided binomial test on the errors' split)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tasks.release.canary.units import error_rate, paired_error_evidence
from tasks.release.stats import binomial_tail
from tasks.release.verdict import Judged

if TYPE_CHECKING:
    from infra.metrics.promql import RouteStats
    from infra.settings import ReleaseSettings


def judge_errors(c: RouteStats, s: RouteStats, policy: ReleaseSettings, *, level: float) -> Judged:
    """The error rail: the candidate's request-level error rate, each user's weight bounded
    (:mod:`tasks.release.canary.units`), above ``error_ratio_max`` x stable's (at least
    ``error_floor``) and significantly higher (:func:`more_errors_p`)."""
    cand, stable = error_rate(c) or 0.0, error_rate(s) or 0.0
    stable_rate = max(stable, policy.error_floor)
    ratio = cand / stable_rate
    line = (
        f"errors: {cand:.2%} of {c.requests:.0f} requests ({c.users:.0f} users) = {ratio:.2f}x stable "
        f"{stable_rate:.2%} (max {policy.error_ratio_max:g}x)"
    )
    evidence: dict[str, Any] = {"error_ratio_vs_stable": ratio}
    failed = ratio > policy.error_ratio_max
    if failed:
        p = more_errors_p(c, s)
        evidence["error_p"] = p
        failed = p < level
        line += f"; one-sided p={p:.2g}" + ("" if failed else ": not judged higher")
    return Judged(line=line, failed=failed, evidence=evidence)


def more_errors_p(c: RouteStats, s: RouteStats) -> float:
    """One-sided p-value that the candidate's error rate is higher (errors with each user's
    weight bounded, :func:`~tasks.release.canary.units.error_evidence`): with both versions' errors
    taken together fixed, how often the candidate would hold this many of them or more with
    its share of the requests (a binomial tail: Fisher's exact test without the finite
    population's correction, a little more cautious)."""
    (ec, nc), (es, ns) = paired_error_evidence(c, s)
    if nc <= 0 or ns <= 0 or ec <= 0:
        return 1.0
    return binomial_tail(ec, ec + es, nc / (nc + ns))
