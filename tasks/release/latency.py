"""Is the canary slower, or did a few requests land in a wider histogram bucket?

The p99 guard rail compares quantiles read from the gateway's latency histogram, interpolated
inside buckets that are two to two and a half times wide (0.25, 0.5, 1, 2.5 s). On a
canary step of a dozen requests the candidate's p99 is its slowest request placed near the
top of its bucket: one request at 0.74 s reads as p99 0.94 s, 1.9x a stable p99 of 0.5 s read
from thousands of requests, although both versions answered in the same batches of the same
server (a vLLM e2e run rolled back a 43 -> 64 % candidate that way).

So a p99 over the limit also has to be borne out by the counts, compared over the same
interval: take the smallest bucket bound at or above stable's p99 and count the requests of
both versions slower than it. When the
versions are alike, each slow request is the candidate's with the candidate's share of all
requests in the window, whatever the load did meanwhile (a burst slows both: it adds slow
requests to both sides in proportion); the candidate fails only when it holds significantly more
of them, a one-sided binomial test at the canary's per-test level
(:func:`~tasks.release.sequential.canary_test_alpha`). A clearly slower candidate holds most of
the slow requests; one slow request in a dozen does not.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from infra.promql import QUANTILE, histogram_quantile
from tasks.release.sequential import canary_test_alpha

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
    if failed and (slow := slow_share(candidate, stable)) is not None:
        evidence["slow_requests"] = slow.as_dict()
        failed = slow.p_value < canary_test_alpha(policy)  # borne out by the counts, or not
        line += f"; {slow.describe()}" + ("" if failed else ": not judged slower")
    return Judged(line=line, failed=failed, evidence=evidence)


@dataclass(frozen=True, kw_only=True)
class SlowShare:
    """The slow requests of both versions over the same window, and the test between them."""

    bound_s: float  # the smallest bucket bound at or above stable's p99
    candidate_slow: float  # candidate requests slower than the bound
    slow: float  # requests of both versions slower than the bound
    candidate_share: float  # the candidate's share of all requests in the window
    p_value: float  # one-sided binomial: this many of the slow requests or more

    def describe(self) -> str:
        """The comparison in one line."""
        return (
            f"{self.candidate_slow:.0f} of {self.slow:.0f} requests over "
            f"{self.bound_s * 1000:.0f} ms were the candidate's, which served "
            f"{self.candidate_share:.1%} of requests (binomial p={self.p_value:.2g})"
        )

    def as_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready data."""
        return asdict(self)


def slow_share(candidate: RouteStats, stable: RouteStats) -> SlowShare | None:
    """The slow-request test over both versions' histograms of the same window; None when
    either is missing."""
    cb, sb = candidate.latency_buckets, stable.latency_buckets
    bounds = sorted(b for b in cb if b in sb and not math.isinf(b))
    n, n_stable = cb.get(math.inf, 0.0), sb.get(math.inf, 0.0)
    if not bounds or n <= 0 or n_stable <= 0:
        return None
    stable_p99 = histogram_quantile(QUANTILE, sb) or bounds[0]
    bound = next((b for b in bounds if b >= stable_p99), bounds[-1])
    slow = max(n - cb[bound], 0.0)
    stable_slow = max(n_stable - sb[bound], 0.0)
    share = n / (n + n_stable)
    return SlowShare(
        bound_s=bound,
        candidate_slow=slow,
        slow=slow + stable_slow,
        candidate_share=share,
        p_value=binomial_tail(round(slow), round(slow + stable_slow), share),
    )


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    from scipy import stats

    return float(stats.binom.sf(k - 1, n, p))
