"""Is the canary slower, or did a few requests land in a wider histogram bucket?

The p99 guard rail compares quantiles read from the gateway's latency histogram, interpolated
inside buckets that are two to two and a half times wide (0.25, 0.5, 1, 2.5 s). On a
canary step of a dozen requests the candidate's p99 is its slowest request placed near the
top of its bucket: one request at 0.74 s reads as p99 0.94 s, 1.9x a stable p99 of 0.5 s read
from thousands of requests, although both versions answered in the same batches of the same
server (a vLLM e2e run rolled back a 43 -> 64 % candidate that way).

So a p99 over the limit also has to be borne out by the counts: the bound is the smallest
bucket bound at or above stable's p99, and the candidate fails only when significantly more of
its requests are slower than that bound than stable's share (at least 1 %, what a p99
leaves above it): a one-sided binomial test at ``latency_alpha``. A clearly slower candidate
has most of its requests over the bound and fails on a few; one slow request in a dozen
does not (p = 0.11 against 1 %).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from infra.promql import QUANTILE

if TYPE_CHECKING:
    from infra.promql import RouteStats
    from infra.settings import ReleaseSettings


@dataclass(frozen=True, kw_only=True)
class Judged:
    """A guard rail's verdict: its report line, whether it failed, its evidence."""

    line: str
    failed: bool
    evidence: dict[str, Any]


def judge_p99(candidate: RouteStats, stable: RouteStats, policy: ReleaseSettings) -> Judged | None:
    """The p99 guard rail (None when the candidate's p99 is unknown): over
    ``latency_p99_ratio_max`` x stable's p99 (at least ``latency_floor_s``) and, where both
    histograms are known, significantly more slow requests (:func:`slow_share`)."""
    if candidate.p99_s is None:
        return None
    stable_p99 = max(stable.p99_s or 0.0, policy.latency_floor_s)
    ratio = candidate.p99_s / stable_p99
    evidence: dict[str, Any] = {"p99_ratio_vs_stable": ratio}
    line = (
        f"p99 {candidate.p99_s * 1000:.0f} ms = {ratio:.2f}x stable "
        f"{stable_p99 * 1000:.0f} ms (max {policy.latency_p99_ratio_max:g}x)"
    )
    failed = ratio > policy.latency_p99_ratio_max
    if failed and (slow := slow_share(candidate, stable, stable_p99)) is not None:
        evidence["slow_requests"] = slow.as_dict()
        failed = slow.p_value < policy.latency_alpha  # borne out by the counts, or not
        line += f"; {slow.describe()}" + ("" if failed else ": not judged slower")
    return Judged(line=line, failed=failed, evidence=evidence)


@dataclass(frozen=True, kw_only=True)
class SlowShare:
    """The share of slow requests of both versions and the test between them."""

    bound_s: float  # the smallest bucket bound at or above stable's p99
    candidate_slow: float  # candidate requests slower than the bound
    candidate_requests: float
    stable_share: float  # stable's share over the bound, at least 1 - QUANTILE
    p_value: float  # one-sided binomial: as many slow requests or more at stable's share

    def describe(self) -> str:
        """The comparison in one line."""
        return (
            f"{self.candidate_slow:.0f} of {self.candidate_requests:.0f} candidate requests over "
            f"{self.bound_s * 1000:.0f} ms vs stable's {self.stable_share:.1%} "
            f"(binomial p={self.p_value:.2g})"
        )

    def as_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready data."""
        return asdict(self)


def slow_share(candidate: RouteStats, stable: RouteStats, stable_p99_s: float) -> SlowShare | None:
    """The slow-request test over both versions' histograms; None when either is missing or
    stable's p99 is beyond the last finite bound."""
    cb, sb = candidate.latency_buckets, stable.latency_buckets
    n, n_stable = cb.get(math.inf, 0.0), sb.get(math.inf, 0.0)
    bound = next((b for b in sorted(cb) if b >= stable_p99_s and b in sb), math.inf)
    if math.isinf(bound) or n <= 0:
        return None
    slow = max(n - cb[bound], 0.0)
    stable_slow = max(n_stable - sb[bound], 0.0)
    share = max(stable_slow / n_stable if n_stable > 0 else 0.0, 1.0 - QUANTILE)
    return SlowShare(
        bound_s=bound,
        candidate_slow=slow,
        candidate_requests=n,
        stable_share=share,
        p_value=binomial_tail(round(slow), round(n), share),
    )


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    from scipy import stats

    return float(stats.binom.sf(k - 1, n, p))
