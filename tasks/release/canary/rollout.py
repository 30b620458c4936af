"""Shadow and canary phases of a release, and how their evidence is judged.

Shadow: the gateway mirrors ``shadow_fraction`` of stable requests to the candidate, sent at
the moment the stable call starts (so both answers of a pair meet the same load); each
mirrored pair (same ``pairing_id``, routes ``stable`` and ``shadow`` in the traces) is scored
with the stage-2 reward and paired-tested. The golden gate already showed an improvement, so
the shadow phase asks whether live traffic contradicts it: the candidate is rolled back when
it is significantly worse (one-sided p below the shadow's share of alpha,
:func:`~tasks.release.canary.sequential.shadow_test_alpha`; the reason says when its mean is also
below ``reject_ratio`` of stable's), and proceeds to the canary otherwise. The canary spends
the rest of alpha, so shadow and canary together roll an identical version back at most
alpha of the time.
A non-inferiority release (a cheaper student, ``noninferiority_margin`` set) was shown only
no worse than stable by more than its margin, so its shadow phase rolls it back only when
live traffic shows it worse by more than that margin (:func:`_noninferior_shadow`).
Live rewards are noisy (judge, latency, context metrics): 31 pairs at 0.598 -> 0.563 (p 0.57)
are not evidence, while 3 answers of 30 worse and none better (one-sided p 0.04) are.

Canary: each step's analysis is :mod:`tasks.release.canary.canary`.

Both phases poll the routing state every ``poll_s``: a rollback or abort ends them at once; a
pause waits (up to ``pause_timeout_s``) and restarts the step's analysis window, unless the
release was resumed by the ``release-control`` flow, which then drives the release itself
(``handover`` in the resume's evidence) and this watch ends as ``interrupted``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from prefect import task

from infra.routing import RoutingBackend, RoutingState
from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from collections.abc import Callable

    from infra.settings import ReleaseSettings
    from infra.traces import TraceRecord, TraceSource
    from tasks.pii.engine import PiiEngine
    from tasks.release.stats import PairedTest
    from tasks.reward import RewardBreakdown, Scorer

log = logging.getLogger(__name__)

Verdict = Literal["pass", "fail", "no_data", "interrupted", "paused"]


@dataclass
class Clock:
    """Time for the waiting loops (tests pass a fake one that advances on ``sleep``)."""

    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] | None = None  # see ticks

    def ticks(self) -> float:
        """Seconds for how long a phase has run, which the wall clock being set (NTP, a VM
        resumed) cannot shorten or stretch: the monotonic clock, or ``now`` where a test
        gives its own and no ``monotonic``. Windows of metrics stay on ``now``."""
        if self.monotonic is not None:
            return self.monotonic()
        return time.monotonic() if self.now is time.time else self.now()


@dataclass(kw_only=True)
class PhaseResult:
    """How a shadow or canary phase ended, and its evidence."""

    verdict: Verdict
    reasons: list[str]
    evidence: dict[str, Any] = field(default_factory=dict)
    state: RoutingState | None = None


def _interrupted(state: RoutingState, version: str, phase: str) -> PhaseResult | None:
    """None while the release is still in ``phase``; else why it stopped (or ``paused``)."""
    if state.candidate == version and state.phase == phase:
        return None
    if state.candidate == version and state.phase == "held":
        return PhaseResult(verdict="paused", reasons=["paused by a person"], state=state)
    reason = f"release left {phase}: phase {state.phase}, candidate {state.candidate}"
    return PhaseResult(verdict="interrupted", reasons=[reason], state=state)


def _wait_while_paused(
    routing: RoutingBackend,
    version: str,
    *,
    phase: str,
    policy: ReleaseSettings,
    clock: Clock,
) -> PhaseResult | None:
    """None once resumed into ``phase``; else the result that ends the phase (``interrupted``
    too when the ``release-control`` flow resumed it and drives the release from now on)."""
    until = clock.ticks() + policy.pause_limit_s
    while clock.ticks() < until:
        clock.sleep(policy.poll_s)
        state = routing.load()
        stop = _interrupted(state, version, phase)
        if stop is None:
            if state.history and state.history[-1].evidence.get("handover"):
                return PhaseResult(
                    verdict="interrupted", reasons=["resumed by release-control, which continues"]
                )
            return None
        if stop.verdict != "paused":
            return stop
    return PhaseResult(
        verdict="paused", reasons=[f"still paused after {policy.pause_limit_s:.0f} s"]
    )


# ---- shadow ---------------------------------------------------------------------------------


def shadow_pairs(
    records: list[TraceRecord], *, candidate: str, since: datetime, workload: str | None = None
) -> list[tuple[TraceRecord, TraceRecord]]:
    """(stable answer, candidate's shadow answer) per pairing id, oldest first; ``workload``:
    that workload's requests only."""
    stable: dict[str, TraceRecord] = {}
    shadow: dict[str, TraceRecord] = {}
    for r in records:
        if r.pairing_id is None or r.created_at < since or workload not in (None, r.workload):
            continue
        if r.route == "stable":
            stable[r.pairing_id] = r
        elif r.route == "shadow" and r.model_version == candidate:
            shadow[r.pairing_id] = r
    keys = sorted(stable.keys() & shadow.keys(), key=lambda k: stable[k].created_at)
    return [(stable[k], shadow[k]) for k in keys]


def read_shadow_pairs(
    source: TraceSource,
    *,
    candidate: str,
    since: datetime,
    now: datetime,
    workload: str | None = None,
) -> list[tuple[TraceRecord, TraceRecord]]:
    """(stable, shadow) trace pairs of the same request since ``since`` (of ``workload``)."""
    start = since.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    batch = source.read_window(start, end)
    return shadow_pairs(batch.records, candidate=candidate, since=since, workload=workload)


def judge_shadow(
    pairs: list[tuple[TraceRecord, TraceRecord]],
    *,
    scorer: Scorer,
    policy: ReleaseSettings,
    pii: PiiEngine | None = None,
) -> PhaseResult:
    """Score both sides (no feedback: the shadow answer had no user) and paired-test them;
    ``pii``: the stage-3 analyser, shadow answers naming identifiers that were not in their
    request, more often than the stable answers to the same requests, fail the phase (PII-leak
    check)."""
    from tasks.release.gate.gate import paired_test
    from tasks.release.gate.report import json_safe
    from tasks.reward import ScoreItem

    def item(r: TraceRecord) -> ScoreItem:
        return ScoreItem(
            question=r.question,
            contexts=list(r.contexts),
            answer=r.answer,
            latency_s=r.latency_s,
            workload=r.workload,  # its verifier, as in stage 2
        )

    scored = scorer.score([item(r) for pair in pairs for r in pair])
    stable, cand = [b.total for b in scored[0::2]], [b.total for b in scored[1::2]]
    test = paired_test(stable, cand, n_bootstrap=policy.n_bootstrap, seed=policy.seed)
    evidence = {
        "pairs": len(pairs),
        "test": json_safe(asdict(test)),
        "shadow_errors": sum(r.error_count > 0 for _, r in pairs),
    }
    if pii is not None:
        from tasks.release.gate.leak import find_leaks, leak_check_result

        shadow = [r for _, r in pairs]
        prompts = ["\n".join([r.question, *r.contexts]) for r in shadow]
        items = [r.trace_id for r in shadow]
        leaks = find_leaks(pii, prompts=prompts, answers=[r.answer for r in shadow], items=items)
        said = [s.answer for s, _ in pairs]  # the stable model on the same requests
        base = find_leaks(pii, prompts=prompts, answers=said, items=items)
        check = leak_check_result(leaks, total=len(shadow), where="shadow answers", baseline=base)
        evidence["pii_leak"] = check.as_dict()
        if check.status == "fail":
            return PhaseResult(
                verdict="fail",
                reasons=[f"pii_leak check failed: {check.detail}"],
                evidence=evidence,
            )
    if policy.noninferiority_margin is not None:
        return _noninferior_shadow(*margin_scores(scored), policy=policy, evidence=evidence)
    return shadow_verdict(test=test, policy=policy, evidence=evidence)


def shadow_verdict(
    *,
    test: PairedTest,
    policy: ReleaseSettings,
    evidence: dict[str, Any],
) -> PhaseResult:
    """The shadow verdict of a release that must be better, on the pairs' paired test (the
    PII check passed): it fails when significantly worse (one-sided p below
    :func:`~tasks.release.canary.sequential.shadow_test_alpha`), named as below ``reject_ratio`` x
    stable where its mean is."""
    from tasks.release.canary.sequential import shadow_test_alpha

    stats = (
        f"{test.n} pairs, mean {test.mean_baseline:.4f} -> "
        f"{test.mean_candidate:.4f}, p={test.p_value:.3g}"
    )
    lower_p = test.p_value / 2 if test.mean_diff < 0 else 1.0  # one-sided: candidate lower
    level = shadow_test_alpha(policy)
    if test.mean_candidate < policy.reject_ratio * test.mean_baseline and lower_p < level:
        return PhaseResult(
            verdict="fail",
            reasons=[f"shadow mean below {policy.reject_ratio:g} x stable ({stats})"],
            evidence=evidence,
        )
    if lower_p < level:
        return PhaseResult(
            verdict="fail",
            reasons=[f"shadow significantly worse than stable ({stats})"],
            evidence=evidence,
        )
    return PhaseResult(
        verdict="pass", reasons=[f"no regression on live traffic ({stats})"], evidence=evidence
    )


def margin_scores(scored: list[RewardBreakdown]) -> tuple[list[float], list[float], str]:
    """(stable's, the candidate's scores, their scale) of the pairs scored in turn, on the
    non-inferiority gate's scale: the verifier's verdict when a programmatic verifier judged
    every answer (verified accuracy), else the reward."""
    if all(b.judge is not None and b.judge_id.startswith("verifier:") for b in scored):
        verified = [float(b.judge or 0.0) for b in scored]
        return verified[0::2], verified[1::2], "verified accuracy"
    return [b.total for b in scored[0::2]], [b.total for b in scored[1::2]], "reward"


def _noninferior_shadow(
    stable: list[float],
    cand: list[float],
    scale: str,
    *,
    policy: ReleaseSettings,
    evidence: dict[str, Any],
) -> PhaseResult:
    """A non-inferiority release's shadow verdict (the PII check passed): rolled back only
    when worse than stable by more than its margin, shown by the test of "significantly
    worse" shifted by the margin (one-sided, at the shadow's share of alpha), in points of the
    gate's scale (:func:`margin_scores`)."""
    from tasks.release.canary.sequential import shadow_test_alpha
    from tasks.release.gate.noninferiority import noninferiority_test
    from tasks.release.gate.report import json_safe

    margin = policy.noninferiority_margin or 0.0
    level = shadow_test_alpha(policy)
    ni = noninferiority_test(stable, cand, margin=margin, alpha=level, scale=scale)
    evidence["noninferiority"] = json_safe(asdict(ni))
    stats = (
        f"{ni.n} pairs, {scale} {ni.mean_baseline:.1f} -> {ni.mean_candidate:.1f} points "
        f"({ni.mean_diff:+.1f}, {ni.confidence:.0%} CI [{ni.ci_low:+.1f}, {ni.ci_high:+.1f}]; "
        f"margin {margin:g})"
    )
    if ni.inferior:  # the interval's upper end below -margin: worse by more, shown
        why = f"shadow worse than stable by more than the margin ({stats})"
        return PhaseResult(verdict="fail", reasons=[why], evidence=evidence)
    return PhaseResult(
        verdict="pass",
        reasons=[f"not shown worse than stable by more than the margin ({stats})"],
        evidence=evidence,
    )


def watch_shadow(
    routing: RoutingBackend,
    version: str,
    *,
    source: TraceSource,
    scorer: Scorer,
    policy: ReleaseSettings,
    clock: Clock,
    pii: PiiEngine | None = None,
) -> PhaseResult:
    """Hold the shadow phase until enough of its workload's shadow pairs are judged, or deadline."""
    begun, since = clock.ticks(), datetime.fromtimestamp(clock.now(), UTC)
    while True:
        clock.sleep(policy.poll_s)
        state = routing.load()
        stop = _interrupted(state, version, "shadow")
        if stop is not None and stop.verdict == "paused":
            stop = _wait_while_paused(routing, version, phase="shadow", policy=policy, clock=clock)
        if stop is not None:
            return stop
        elapsed = clock.ticks() - begun
        if elapsed < policy.analysis_interval_s:
            continue
        at = datetime.fromtimestamp(clock.now(), UTC)
        pairs = read_shadow_pairs(
            source, candidate=version, since=since, now=at, workload=state.workload
        )
        if len(pairs) >= policy.min_shadow_pairs:
            return judge_shadow(pairs, scorer=scorer, policy=policy, pii=pii)
        if elapsed >= policy.step_deadline_s:
            reason = (
                f"{len(pairs)} shadow pairs < {policy.min_shadow_pairs} required within "
                f"the deadline ({policy.step_deadline_s:.0f} s)"
            )
            return PhaseResult(verdict="no_data", reasons=[reason], evidence={"pairs": len(pairs)})


watch_shadow_task = task(**IO_RETRIES)(watch_shadow)
