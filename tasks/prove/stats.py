"""Intervals and the paired test of the ablation.

Per arm: the mean golden accuracy over seeds with a 95 % Student-t interval over the seeds
(the training procedure's run-to-run spread); with one seed, a Wilson interval over the golden
items instead.

Loop vs control, **paired on golden items**: both arms answer the same 400 golden items, so
item difficulty (the largest source of variance) cancels in the per-item difference; each
item's score is its mean correctness over the seeds, so the training seeds' spread is in it
too. A paired t-test on the per-item differences (400 pairs, valid with few seeds) is the
decision; the Wilcoxon signed-rank test and a seed-paired t-test on the per-seed accuracies
(seed i of one arm against seed i of the other: n - 1 degrees of freedom, so it needs many
seeds to be sensitive) are reported beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(kw_only=True)
class Interval:
    """A mean with its confidence interval and how it was computed."""

    mean: float
    low: float
    high: float
    method: str  # "t over seeds" | "Wilson over items"


def seed_interval(accuracies: Sequence[float], *, items: int, confidence: float = 0.95) -> Interval:
    """Mean accuracy with a t interval over seeds (Wilson over items for a single seed)."""
    from scipy import stats

    n = len(accuracies)
    mean = sum(accuracies) / n
    if n >= 2:
        sd = math.sqrt(sum((a - mean) ** 2 for a in accuracies) / (n - 1))
        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
        return Interval(mean=mean, low=mean - half, high=mean + half, method="t over seeds")
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    denom = 1 + z * z / items
    centre = (mean + z * z / (2 * items)) / denom
    half = z * math.sqrt(mean * (1 - mean) / items + z * z / (4 * items * items)) / denom
    return Interval(mean=mean, low=centre - half, high=centre + half, method="Wilson over items")


@dataclass(kw_only=True)
class PairedComparison:
    """``a`` against ``b``: positive differences favour ``a``."""

    a: str
    b: str
    items: int
    seeds: int
    mean_diff: float  # accuracy points as a fraction (0.1 = 10 points)
    ci_low: float
    ci_high: float
    t_p: float  # paired t-test on golden items (the decision)
    wilcoxon_p: float
    seed_t_p: float | None  # paired t-test on per-seed accuracies (None with one seed)
    wins: int  # items where a is right more often than b
    losses: int


def item_means(runs: Sequence[Sequence[float]]) -> list[float]:
    """Per golden item, the mean score over the seeds' runs."""
    return [sum(col) / len(col) for col in zip(*runs, strict=True)]


def compare(
    a: str,
    b: str,
    *,
    a_runs: Sequence[Sequence[float]],
    b_runs: Sequence[Sequence[float]],
    confidence: float = 0.95,
) -> PairedComparison:
    """Paired comparison of two arms on golden items (see the module docstring)."""
    from scipy import stats

    ma, mb = item_means(a_runs), item_means(b_runs)
    diffs = [x - y for x, y in zip(ma, mb, strict=True)]
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n) if n > 1 else 0.0
    if sd == 0:
        t_p = 1.0 if mean == 0 else 0.0
    else:
        t_p = float(stats.ttest_rel(ma, mb).pvalue)
    nonzero = [d for d in diffs if d != 0]
    wilcoxon_p = float(stats.wilcoxon(nonzero).pvalue) if nonzero else 1.0
    acc_a = [sum(r) / len(r) for r in a_runs]
    acc_b = [sum(r) / len(r) for r in b_runs]
    seed_p = None
    if len(acc_a) >= 2 and len(acc_a) == len(acc_b):
        seed_diffs = [x - y for x, y in zip(acc_a, acc_b, strict=True)]
        if len(set(seed_diffs)) > 1:
            seed_p = float(stats.ttest_rel(acc_a, acc_b).pvalue)
        else:
            seed_p = 1.0 if seed_diffs[0] == 0 else 0.0
    return PairedComparison(
        a=a,
        b=b,
        items=n,
        seeds=len(a_runs),
        mean_diff=mean,
        ci_low=mean - half,
        ci_high=mean + half,
        t_p=t_p,
        wilcoxon_p=wilcoxon_p,
        seed_t_p=seed_p,
        wins=sum(d > 0 for d in diffs),
        losses=sum(d < 0 for d in diffs),
    )
