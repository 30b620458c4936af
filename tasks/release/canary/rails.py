"""The canary's guard rails, one list (:data:`RAILS`): each rail judges one canary window,
candidate against stable over the same interval, at the canary's per-test level, and returns
one verdict (:class:`~tasks.release.verdict.Judged`, or None: nothing to judge). The false-alarm
budget counts them (:func:`~tasks.release.canary.sequential.tests_per_step`): a new rail is one
function and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tasks.release.canary.cost_rail import CostLooks, judge_cost
from tasks.release.canary.error_rail import judge_errors
from tasks.release.canary.feedback_rail import judge_feedback
from tasks.release.canary.latency import judge_p99
from tasks.release.verdict import Judged

if TYPE_CHECKING:
    from infra.metrics.promql import RouteStats
    from infra.settings import ReleaseSettings

# (candidate, stable, policy, the per-test level, the step's looks at cost) -> the verdict
Judge = Callable[
    ["RouteStats", "RouteStats", "ReleaseSettings", float, CostLooks | None], Judged | None
]


@dataclass(frozen=True, kw_only=True)
class Rail:
    """One guard rail: its name, how it judges, how many failure tests of the false-alarm
    budget it runs a step, and in which releases it runs them (None: every release)."""

    name: str
    judge: Judge
    tests: int = 1
    when: Callable[[ReleaseSettings], bool] | None = None


RAILS: list[Rail] = [
    Rail(
        name="errors",
        judge=lambda c, s, policy, level, _cost: judge_errors(c, s, policy, level=level),
    ),
    Rail(
        name="p99",
        judge=lambda c, s, policy, level, _cost: judge_p99(c, s, policy, level=level),
    ),
    Rail(
        name="feedback",
        judge=lambda c, s, policy, level, _cost: judge_feedback(c, s, policy, level=level),
    ),
    Rail(  # a non-inferiority release's (cost_ratio_max set): the saving must hold in traffic
        name="cost",
        judge=lambda c, s, policy, level, cost: judge_cost(c, s, policy, cost, level=level),
        when=lambda policy: policy.cost_ratio_max is not None,
    ),
]
