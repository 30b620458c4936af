"""Is the canary slower, or did a few requests land in a wider histogram bucket, or a few slow
users on its side?

The p99 guard rail compares quantiles read from the gateway's latency histogram, interpolated
inside buckets (:data:`infra.gateway.metrics.LATENCY_BUCKETS`: about 1.2-1.33x apart from 0.1
to 10 s). On a canary step of a dozen requests the candidate's p99 is its slowest request
placed near the top of its bucket: one request at 0.74 s read as p99 0.94 s in the 0.5-1 s
bucket of old, 1.9x a stable p99 of 0.5 s read from thousands of requests, although both
versions answered in the same batches of the same server (a vLLM e2e run rolled back a
43 -> 64 % candidate that way).

So a p99 over the limit also has to be borne out by the counts, compared over the same
interval: take the bucket bounds just above and just below stable's p99 and count the requests
of both versions slower than each. When the versions are alike, each slow request is the
candidate's with the candidate's share of all requests in the window, whatever the load did
meanwhile (a burst slows both: it adds slow requests to both sides in proportion); the
candidate fails only when it holds significantly more of them, a one-sided binomial test at
the canary's per-test level (:func:`~tasks.release.canary.sequential.canary_test_alpha`). Twice
stable's share of slow requests (``TAIL_RATIO``), borne out by the same test, fails the rail
too: a tail-only regression (the slowest 2 % 1.6x slower, the median the same) shows there.

The test counts users, not requests: routing is sticky, and a user whose own requests are
slow brings a cluster of slow requests to one side. The gateway counts, per version and step,
the users who had a request slower than each bucket bound (``agent_slow_voices_total``,
:mod:`infra.gateway.voices`), and the test compares the candidate's share of the users over
the bound with its share of the users served. Counted as independent requests, 3-7 % of steps
failed an identical candidate whose users differ in their own latency (budget 0.25 %). Where
no such count was read (an older gateway), each version's slow requests are weighed by its
users per request (:mod:`tasks.release.canary.units`), which a few heavy slow users outweigh:
it rolled back 1 of 150 identical releases through Prometheus. On 50 % steps of 2,400 requests
from 1,000 users with their own latency scales, counted users failed 0 of 400 identical
candidates and 177 of 200 slowed 1.5x (the estimate: 2 and 127). A tail that lives in a few
slow users is still a few users' evidence.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from infra.metrics.promql import QUANTILE, histogram_quantile
from tasks.release.canary.units import users_per_request
from tasks.release.stats import binomial_tail
from tasks.release.verdict import Judged

if TYPE_CHECKING:
    from infra.metrics.promql import RouteStats
    from infra.settings import ReleaseSettings


def judge_p99(
    candidate: RouteStats, stable: RouteStats, policy: ReleaseSettings, *, level: float
) -> Judged | None:
    """The p99 guard rail (None when the candidate's p99 is unknown): over
    ``latency_p99_ratio_max`` x stable's p99 (at least ``latency_floor_s``) and, where both
    histograms are known, significantly more slow requests (:func:`slow_share`). A window in
    which stable served too few users never reaches it (:func:`~tasks.release.canary.canary.too_little`):
    the floor alone is no comparison (a loop test's canary was rolled back on one candidate
    request slowed by the machine, 479 ms against the 50 ms floor, stable's holdback idle)."""
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
    slow = slow_share(candidate, stable)
    if slow is not None and (failed or slow.tail_ratio >= TAIL_RATIO):
        evidence["slow_requests"] = slow.as_dict()
        failed = slow.p_value < level  # borne out by the counts, or not
        line += f"; {slow.describe()}" + ("" if failed else ": not judged slower")
    return Judged(line=line, failed=failed, evidence=evidence)


TAIL_RATIO = 2.0  # twice stable's share of slow requests is a regression, whatever p99 reads


@dataclass(frozen=True, kw_only=True)
class SlowShare:
    """The slow requests of both versions over the same window, and the test between them on
    the user scale (:mod:`tasks.release.canary.units`)."""

    bound_s: float  # a bucket bound next to stable's p99
    candidate_slow: float  # candidate requests slower than the bound
    slow: float  # requests of both versions slower than the bound
    candidate_share: float  # the candidate's share of all requests in the window
    # the same on the user scale (the test's counts): users with a request slower than the
    # bound (or slow requests x users per request), the candidate's share of the users
    candidate_slow_users: float
    slow_users: float
    candidate_user_share: float
    p_value: float  # one-sided binomial on the user scale (x the bounds tried)

    @property
    def tail_ratio(self) -> float:
        """The candidate's share of slow requests over stable's (inf: stable had none)."""
        stable_share = 1.0 - self.candidate_share
        stable_slow = self.slow - self.candidate_slow
        if self.candidate_slow <= 0:
            return 0.0
        if stable_slow <= 0 or stable_share <= 0:
            return math.inf
        return (self.candidate_slow / self.candidate_share) / (stable_slow / stable_share)

    def describe(self) -> str:
        """The comparison in one line."""
        return (
            f"{self.candidate_slow:.0f} of {self.slow:.0f} requests over "
            f"{self.bound_s * 1000:.0f} ms were the candidate's, which served "
            f"{self.candidate_share:.1%} of requests ({self.candidate_slow_users:.1f} of "
            f"{self.slow_users:.1f} on the user scale, where it served "
            f"{self.candidate_user_share:.1%} of users; binomial p={self.p_value:.2g})"
        )

    def as_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready data."""
        return asdict(self)


def slow_share(candidate: RouteStats, stable: RouteStats) -> SlowShare | None:
    """The slow-request test over both versions' histograms of the same window, at the bucket
    bounds just above and just below stable's p99 (the more significant of the two; its
    p-value doubled, Bonferroni), on the user scale: the users of each version who had a
    request slower than the bound (``agent_slow_voices_total``) against the candidate's share
    of users, so a user whose own requests are slow counts as one user, not as a cluster of
    independent slow requests. Where the gateway counted no slow users (an older gateway), each
    version's slow requests times its users per request stand in for them. None when either
    histogram is missing."""
    cb, sb = candidate.latency_buckets, stable.latency_buckets
    bounds = sorted(b for b in cb if b in sb and not math.isinf(b))
    n, n_stable = cb.get(math.inf, 0.0), sb.get(math.inf, 0.0)
    if not bounds or n <= 0 or n_stable <= 0:
        return None
    stable_p99 = histogram_quantile(QUANTILE, sb) or bounds[0]
    above = next((b for b in bounds if b >= stable_p99), bounds[-1])
    below = max((b for b in bounds if b < stable_p99), default=above)
    tried = {above, below}
    # the gateway counts them (a bound no user of a version was slower than has no series)
    counted = bool(candidate.slow_users or stable.slow_users)
    counted = counted and candidate.users > 0 and stable.users > 0
    scale_c = scale_s = 1.0
    if counted:
        user_share = candidate.users / (candidate.users + stable.users)
    else:
        scale_c = users_per_request(candidate) or 1.0
        scale_s = users_per_request(stable) or 1.0
        user_share = n * scale_c / (n * scale_c + n_stable * scale_s)
    tests = []
    for bound in sorted(tried):
        slow = max(n - cb[bound], 0.0)
        stable_slow = max(n_stable - sb[bound], 0.0)
        if counted:
            slow_c = min(candidate.slow_users.get(bound, 0.0), candidate.users)
            slow_all = slow_c + min(stable.slow_users.get(bound, 0.0), stable.users)
        else:
            slow_c, slow_all = slow * scale_c, slow * scale_c + stable_slow * scale_s
        tests.append(
            SlowShare(
                bound_s=bound,
                candidate_slow=slow,
                slow=slow + stable_slow,
                candidate_share=n / (n + n_stable),
                candidate_slow_users=slow_c,
                slow_users=slow_all,
                candidate_user_share=user_share,
                p_value=min(1.0, binomial_tail(slow_c, slow_all, user_share) * len(tried)),
            )
        )
    return min(tests, key=lambda t: (t.p_value, -t.bound_s))
