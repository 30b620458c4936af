"""The canary's cost rail of a non-inferiority release (``cost_ratio_max`` set): a step fails
when the candidate is *shown* dearer than ``cost_ratio_max`` x stable's compute per request,
not when one window's ratio lands a hair above it.

Requests are noisy (answers differ in length, a batch's compute is shared, the machine's load
comes and goes), and one window's ratio of the two means says nothing about how sure it is.
The rail therefore cuts the step into *slices*: the stretch between two looks of the step (the
canary looks every ``poll_s``) in which each version answered at least
:data:`SLICE_REQUESTS` requests. Both versions in a slice were served at the same moment, so a
slow spell of the machine falls on both; each slice gives one ratio of compute per request,
at the same batch sizes where the server says them
(:func:`infra.metrics.cost.matched_compute_ratio`, when the whole window can be matched). The step
fails when the window's ratio is above ``cost_ratio_max`` and the candidate was dearer than that in
more slices than chance explains: a one-sided sign test over the slices, as the gate's over its
turns, at :func:`~tasks.release.canary.sequential.canary_test_alpha`.

A candidate that costs what stable costs is dearer in about half the slices (fewer when its
per-request compute is skewed: a mean of a few requests lies below the true mean more often
than above), so the rail fails it in at most that level of steps; a candidate at 1.5x is
dearer in nearly every slice and fails once about nine slices are in (2^-9 = 0.002).

The false-alarm budget: this is one more failure test per step in a non-inferiority release,
and :func:`~tasks.release.canary.sequential.tests_per_step` counts it: with the cost rail the canary's
``alpha`` is split over six tests a step instead of five.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infra.metrics.cost import CostStats, matched_compute_ratio
from tasks.release.verdict import Judged

if TYPE_CHECKING:
    from infra.metrics.promql import RouteStats
    from infra.settings import ReleaseSettings

SLICE_REQUESTS = 5  # requests of each version a slice needs: one request's ratio is noise


@dataclass
class CostLooks:
    """Both versions' cost as read at each look of one canary step, from the step's start
    (a new step, or a step resumed after a pause, starts a new one)."""

    looks: list[tuple[CostStats, CostStats]] = field(default_factory=list)

    def add(self, candidate: CostStats, stable: CostStats) -> None:
        """Keep this look's readings (both since the step's start)."""
        self.looks.append((candidate, stable))

    def slice_ratios(self, *, matched: bool) -> list[float]:
        """The candidate's compute per request over stable's in each slice, oldest first
        (``matched``: at the same batch sizes, a slice whose buckets do not match running
        on into the next)."""
        ratios: list[float] = []
        start = (CostStats(), CostStats())
        for cand, stable in self.looks:
            c, s = cand.since(start[0]), stable.since(start[1])
            if min(c.requests, s.requests) < SLICE_REQUESTS:
                continue
            ratio = slice_ratio(c, s, matched=matched)
            if ratio is not None:
                ratios.append(ratio)
                start = (cand, stable)
        return ratios


def slice_ratio(c: CostStats, s: CostStats, *, matched: bool) -> float | None:
    """One slice's ratio of compute per request (None: not comparable)."""
    if matched:
        m = matched_compute_ratio(c, s)
        return None if m is None else m.ratio
    cand, stable = c.compute_per_request_s, s.compute_per_request_s
    return cand / stable if cand is not None and stable else None


def dearer_p(ratios: list[float], ratio_max: float) -> tuple[int, int, float]:
    """(slices above ``ratio_max``, slices not equal to it, one-sided sign-test p-value that
    the candidate is dearer than ``ratio_max`` x stable in more than half of them)."""
    from scipy import stats

    n = sum(r != ratio_max for r in ratios)
    k = sum(r > ratio_max for r in ratios)
    p = float(stats.binom.sf(k - 1, n, 0.5)) if n and k else 1.0
    return k, n, p


def judge_cost(
    c: RouteStats,
    s: RouteStats,
    policy: ReleaseSettings,
    looks: CostLooks | None = None,
    *,
    level: float,
) -> Judged | None:
    """The cost rail (None when off, or when either side has no metered request): the window's
    ratio of compute per request against ``cost_ratio_max``, failed only when the step's
    slices show it (``looks``: the step's, this look added; None: this window alone, one
    slice, never enough to fail)."""
    if policy.cost_ratio_max is None or c.cost is None or s.cost is None:
        return None
    cand, stable = c.cost.compute_per_request_s, s.cost.compute_per_request_s
    if cand is None or not stable:
        return None
    ratio, rail = cand / stable, policy.cost_ratio_max
    evidence: dict[str, Any] = {"cost_ratio_vs_stable": ratio}
    line = f"cost: {1000 * cand:.2f} ms compute per request = {ratio:.2f}x stable {1000 * stable:.2f} ms"
    matched = matched_compute_ratio(c.cost, s.cost)
    if matched is not None:
        evidence |= {
            "cost_ratio_matched_batches": matched.ratio,
            "matched_coverage": matched.coverage,
        }
        line = (
            f"cost: {1000 * matched.candidate_s:.2f} ms compute per request = {matched.ratio:.2f}x "
            f"stable {1000 * matched.stable_s:.2f} ms at the same batch sizes "
            f"({matched.coverage:.0%} of its requests; unmatched {ratio:.2f}x)"
        )
        ratio = matched.ratio
    looks = looks if looks is not None else CostLooks()
    looks.add(c.cost, s.cost)
    dearer, n, p = dearer_p(looks.slice_ratios(matched=matched is not None), rail)
    evidence |= {"cost_slices": n, "cost_dearer_slices": dearer, "cost_p": p}
    failed = ratio > rail and p < level
    line += f" (max {rail:g}x); dearer in {dearer} of {n} slices, one-sided p={p:.2g}" + (
        "" if failed or ratio <= rail else f": not shown dearer (fails at p < {level:.2g})"
    )
    return Judged(line=line, failed=failed, evidence=evidence)
