"""Canary steps: each step routes a share of the line's users to the candidate, waits
``analysis_interval_s`` and compares the two versions over the same interval, for the same
workload, from the same series (:class:`~infra.metrics.promql.CanaryMetrics`), never against
stable's history: a burst of load during the step slows both alike. The step that would send 100 %
keeps ``stable_holdback`` % of users on stable until the decision, so the last comparison is
concurrent too; promotion then routes everyone to the new stable.

What is compared, on which unit (:mod:`tasks.release.canary.units`; routing is sticky per user, so
a user's requests are not independent trials):

- errors: the request-level error rate, which does not saturate for heavy users, each
  version's errors counted at most as its users who met one times its requests per user (one
  user retrying a failing request is one user); fails above ``error_ratio_max`` x stable's
  rate (at least ``error_floor``, 0.1 %) and significantly higher (one-sided binomial test
  on the errors' split, given their total);
- p99 latency: above ``latency_p99_ratio_max`` x stable's p99 and significantly more users
  with a slow request than the candidate's share of users (the gateway's
  ``agent_slow_voices_total``; :mod:`tasks.release.canary.latency`);
- feedback: each user's first vote; below ``feedback_ratio_min`` x stable with ``min_feedback``
  users on both sides and significantly lower (:mod:`tasks.release.canary.feedback_rail`);
- cost (a non-inferiority release, ``cost_ratio_max`` set): the candidate's measured compute
  per request (:mod:`infra.metrics.cost`) above ``cost_ratio_max`` x stable's, and shown so by a
  one-sided sign test over the step's slices (:mod:`tasks.release.canary.cost_rail`), fails the
  step: the saving a cheaper model was promoted for must hold in traffic. Where the model
  server says how many answers it generated together, both are compared at the same batch
  sizes (:func:`infra.metrics.cost.matched_compute_ratio`): the candidate's small share of the
  traffic forms smaller batches, which alone would make each of its answers dearer;
- an always-valid sequential test (:mod:`tasks.release.canary.sequential`) of errors and feedback on
  every poll, its evidence kept per direction: a step fails at once when the candidate is
  beyond a rail and clearly worse, and passes early when clearly better (at
  ``sequential_alpha``) with the rails holding.

The false-alarm budget: a version identical to stable must be rolled back at most ``alpha`` of
the time over the whole canary. Each step runs five failure tests (errors and feedback at the
horizon and sequentially "worse", latency at the horizon; the sequential "better" tests only
pass a step early; the cost rail is a sixth where it is set), so each runs at the canary's
share of ``alpha`` over ``5 x steps`` (:func:`~tasks.release.canary.sequential.canary_test_alpha`,
Bonferroni; the shadow phase spends ``shadow_alpha_share`` of ``alpha``). ``make bench`` measures the
rates (tests/benchmarks/bench_release_decisions.py).

No-data rule: fewer than ``min_requests_per_step`` candidate requests, fewer than
``min_users_per_step`` users on either side (stable's as much as the candidate's: no
comparison, no pass), or unreadable metrics keep the step waiting until ``step_deadline_s``;
then it ends as ``no_data`` (held for a person, or rolled back: ``no_data_action``), never
passes.

Sample ratio mismatch: a step passes only when each side's distinct users match the step's
weight (``weight`` % of the users on the candidate; a chi-square test of the two counts at
``srm_alpha``). A split that does not match it is broken (a client choosing its version, a
bucket that leaks, a side dropping its users) and no comparison on it can be trusted: the step
waits, then holds for a person like a step without data. A failure stands (the candidate
failing its users is the safe side to act on).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from prefect import task

from infra.errors import MetricsError
from infra.task_retries import IO_RETRIES
from tasks.release.canary.cost_rail import CostLooks
from tasks.release.canary.rails import RAILS
from tasks.release.canary.rollout import Clock, PhaseResult, _interrupted, _wait_while_paused
from tasks.release.canary.sequential import (
    SequentialState,
    canary_test_alpha,
    evidence,
    measure,
    sequential_verdict,
)
from tasks.release.verdict import Judged

if TYPE_CHECKING:
    from infra.metrics.promql import CanaryMetrics, CanaryWindow, RouteStats
    from infra.routing import RoutingBackend
    from infra.settings import ReleaseSettings
    from tasks.release.canary.sequential import Measure

log = logging.getLogger(__name__)


def analyse_step(
    window: CanaryWindow | None,
    policy: ReleaseSettings,
    *,
    cost: CostLooks | None = None,
    weight: float | None = None,
) -> PhaseResult:
    """Judge one canary window by its guard rails (the sequential test is the step's own,
    :func:`sequential_verdict`, after it; ``cost``: the step's looks at cost, which
    the cost rail's test is over; ``weight``: the step's candidate share of users in percent,
    whose split a pass must match, :func:`sample_ratio_mismatch`; None: not checked)."""
    if window is None:
        return PhaseResult(verdict="no_data", reasons=["metrics unavailable"])
    c, s = window.candidate, window.stable
    evidence: dict[str, Any] = {
        "source": window.source,
        "candidate": c.as_dict(),
        "stable": s.as_dict(),
        "window_s": round(window.window_s, 1),
        "test_alpha": canary_test_alpha(policy),
    }
    if reason := too_little(c, s, policy):
        return PhaseResult(verdict="no_data", reasons=[reason], evidence=evidence)
    failures: list[str] = []
    notes: list[str] = []
    level = canary_test_alpha(policy)
    for rail in RAILS:  # each judges (None: it has nothing to say, e.g. turned off)
        if (judged := rail.judge(c, s, policy, level, cost)) is None:
            continue
        evidence.update(judged.evidence)
        (failures if judged.failed else notes).append(judged.line)
    if not failures and weight is not None and (srm := sample_ratio_mismatch(c, s, weight, policy)):
        evidence["sample_ratio_mismatch"] = srm.evidence
        return PhaseResult(verdict="no_data", reasons=[srm.line, *notes], evidence=evidence)
    return PhaseResult(
        verdict="fail" if failures else "pass", reasons=failures or notes, evidence=evidence
    )


def sample_ratio_mismatch(
    c: RouteStats, s: RouteStats, weight: float, policy: ReleaseSettings
) -> Judged | None:
    """The step's split when it does not match its weight (None: it does, or it cannot be
    tested): Pearson's chi-square of the candidate's and stable's distinct users against
    ``weight`` % and the rest, one degree of freedom, significant below ``srm_alpha``. Users,
    not requests: routing assigns users, and a heavy user's requests all land on one side."""
    share = weight / 100.0
    users = c.users + s.users
    if policy.srm_alpha <= 0 or not 0.0 < share < 1.0 or users <= 0:
        return None
    from scipy.stats import chi2

    expected_c, expected_s = users * share, users * (1.0 - share)
    stat = (c.users - expected_c) ** 2 / expected_c + (s.users - expected_s) ** 2 / expected_s
    p = float(chi2.sf(stat, 1))
    if p >= policy.srm_alpha:
        return None
    line = (
        f"sample ratio mismatch: the candidate served {c.users:.0f} of {users:.0f} users "
        f"({c.users / users:.1%}) at weight {weight:g} %, chi-square p={p:.2g} < "
        f"{policy.srm_alpha:g} (FLYWHEEL_RELEASE__SRM_ALPHA): the split is broken, no comparison"
    )
    evidence = {"candidate_users": c.users, "users": users, "weight": weight, "p_value": p}
    return Judged(line=line, failed=True, evidence=evidence)


def too_little(c: RouteStats, s: RouteStats, policy: ReleaseSettings) -> str | None:
    """Why this window cannot be judged (None: it can): too few candidate requests, or too
    few users on either side. Each rail compares the candidate with stable over the same
    interval; with stable idle (one API key whose bucket is in the canary cohort, a small line
    at the holdback step) every rail would read as passed without comparing anything."""
    if c.requests < policy.min_requests_per_step:
        return f"{c.requests:.0f} candidate requests < {policy.min_requests_per_step} required"
    for side, stats in (("stable", s), ("candidate", c)):
        if stats.users < policy.min_users_per_step:
            return (
                f"{side} served {stats.users:.0f} users < {policy.min_users_per_step} required "
                "(FLYWHEEL_RELEASE__MIN_USERS_PER_STEP): no comparison"
            )
    return None


def beyond_rails(measures: list[Measure], policy: ReleaseSettings) -> set[str]:
    """The measures whose effect is past their guard rail (a sequential failure needs it: a
    significant but harmless difference never rolls a version back)."""
    out = set()
    for m in measures:
        if m.name == "error_ratio":
            if m.candidate > policy.error_ratio_max * max(m.stable, policy.error_floor):
                out.add(m.name)
        elif m.candidate < policy.feedback_ratio_min * m.stable:
            out.add(m.name)
    return out


def watch_step(
    routing: RoutingBackend,
    version: str,
    *,
    stable: str,
    metrics: CanaryMetrics,
    policy: ReleaseSettings,
    clock: Clock,
) -> PhaseResult:
    """Hold one canary step until it passes, fails, runs out of time without data, or the
    release is interrupted. Both versions are read over the step's own window; a workload's
    release (``routing`` scoped to it) reads that workload's series alone."""
    step_start, begun = metrics.mark(), clock.ticks()  # the window's start, the step's
    seq, cost = SequentialState(), CostLooks()
    while True:
        clock.sleep(policy.poll_s)
        state = routing.load()
        stop = _interrupted(state, version, "canary")
        if stop is not None and stop.verdict == "paused":
            stop = _wait_while_paused(routing, version, phase="canary", policy=policy, clock=clock)
            if stop is None:  # resumed: the step's evidence starts again
                step_start, begun = metrics.mark(), clock.ticks()
                seq, cost = SequentialState(), CostLooks()
                continue
        if stop is not None:
            return stop
        elapsed = clock.ticks() - begun  # not the wall clock, which may be set meanwhile
        at_horizon = elapsed >= policy.analysis_interval_s
        try:
            window = metrics.read(
                candidate=version, stable=stable, since=step_start, workload=state.workload
            )
        except MetricsError as exc:
            log.warning("canary metrics unavailable: %s", exc)
            window = None
        result = analyse_step(window, policy, cost=cost, weight=state.weight)
        early = _sequential_look(window, result, policy, seq, elapsed_s=elapsed)
        if early is not None:
            return early
        if not at_horizon:
            continue
        if result.verdict != "no_data":
            return result
        if elapsed >= policy.step_deadline_s:
            result.reasons.append(
                f"no decision within the step deadline ({policy.step_deadline_s:.0f} s)"
            )
            return result


def _sequential_look(
    window: CanaryWindow | None,
    result: PhaseResult,
    policy: ReleaseSettings,
    seq: SequentialState,
    *,
    elapsed_s: float,
) -> PhaseResult | None:
    """The step's result when the always-valid test ends it now (beyond a rail and clearly
    worse, or clearly better with the guard rails passing); else None, with its evidence added
    to ``result``."""
    if window is None or window.candidate.requests < policy.sequential_min_requests:
        return None
    measures = measure(window, policy, seq)
    early, reasons = sequential_verdict(
        measures,
        alpha=policy.sequential_alpha,
        fail_alpha=canary_test_alpha(policy),
        beyond_rail=beyond_rails(measures, policy),
        # a broken split holds a pass, not the early failure of a clearly worse candidate
        enough_requests=result.verdict != "no_data" or "sample_ratio_mismatch" in result.evidence,
        guard_rails_pass=result.verdict == "pass",
    )
    result.evidence["sequential"] = evidence(measures, seq)
    result.evidence["elapsed_s"] = round(elapsed_s, 1)
    if early == "continue":
        if result.verdict in ("pass", "fail"):
            result.reasons.extend(reasons)
        return None
    horizon = (
        f"stopped after {elapsed_s:.0f} s of the step's {policy.analysis_interval_s:.0f} s "
        f"horizon (fail at p < {canary_test_alpha(policy):.2g})"
    )
    guard = result.reasons if early == "pass" else []
    return PhaseResult(verdict=early, reasons=[*reasons, horizon, *guard], evidence=result.evidence)


watch_step_task = task(**IO_RETRIES)(watch_step)
