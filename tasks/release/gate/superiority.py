"""The superiority verdict of the release gate (its rule, in order, is the gate's module
docstring, :mod:`tasks.release.gate.gate`): a leak rolls back; too few pairs hold, unless the
regression is catastrophic; a significantly lower candidate is rejected; a significantly
better one proceeds unless a slice regressed or a check failed; anything else is held."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tasks.release.verdict import Decision

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.settings import ReleaseSettings
    from tasks.release.gate.drift import Check
    from tasks.release.stats import PairedTest
    from tasks.release.verdict import SliceResult


def decide(
    test: PairedTest,
    policy: ReleaseSettings,
    *,
    slices: Sequence[SliceResult] = (),
    checks: Sequence[Check] = (),
) -> tuple[Decision, list[str]]:
    """The gate's decision and the reasons a reader sees (see the module docstring): the
    reason that decided first, then every failed check it did not already name (the evidence
    of reward hacking never hides behind a leak or an insignificant result)."""
    failed = [_failed(c) for c in checks if c.status == "fail"]
    decision, reasons = _decide(test, policy, slices=slices, checks=checks, failed=failed)
    return decision, reasons + [r for r in failed if r not in reasons]


def _failed(check: Check) -> str:
    return f"{check.name} check failed: {check.detail}"


def _decide(
    test: PairedTest,
    policy: ReleaseSettings,
    *,
    slices: Sequence[SliceResult],
    checks: Sequence[Check],
    failed: list[str],
) -> tuple[Decision, list[str]]:
    stats = f"p={test.p_value:.3g}, mean {test.mean_baseline:.4f} -> {test.mean_candidate:.4f}"
    leaks = [_failed(c) for c in checks if c.name == "pii_leak" and c.status == "fail"]
    if leaks:
        return Decision.ROLLBACK, leaks
    if test.n < policy.min_samples:
        if (
            test.mean_candidate < policy.reject_ratio * test.mean_baseline
            and test.mean_diff < 0
            and test.p_value < policy.alpha
        ):
            return Decision.ROLLBACK, [
                f"catastrophic regression on only {test.n} paired samples: candidate mean "
                f"{test.mean_candidate:.4f} < {policy.reject_ratio:g} x baseline mean "
                f"{test.mean_baseline:.4f}, significantly worse ({stats})"
            ]
        return Decision.MANUAL_REVIEW, [f"only {test.n} paired samples (< {policy.min_samples})"]
    lower = test.mean_diff < 0 and test.p_value < policy.alpha  # as "better", two-sided
    if test.mean_candidate < policy.reject_ratio * test.mean_baseline and lower:
        return Decision.ROLLBACK, [
            f"candidate mean {test.mean_candidate:.4f} < {policy.reject_ratio:g} x baseline "
            f"mean {test.mean_baseline:.4f} ({stats})"
        ]
    if not (test.p_value < policy.alpha and test.mean_diff > 0):
        return Decision.MANUAL_REVIEW, [
            f"not significantly better at alpha {policy.alpha:g} ({stats})"
        ]
    blockers = [
        f"slice {s.name} regressed by {-s.diff:.4f} (> {policy.slice_tolerance:g})"
        for s in slices
        if s.regressed
    ] + failed
    if blockers:
        return Decision.MANUAL_REVIEW, [f"significantly better ({stats}), but:", *blockers]
    return Decision.PROCEED, [f"significantly better ({stats})"]
