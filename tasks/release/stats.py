"""The paired comparison of the release gate (and of the shadow phase): candidate - baseline
per item, tested four ways; and the binomial tail the gate's sign test and the canary's
latency and error rails share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(kw_only=True)
class PairedTest:
    """A paired comparison: means, t-test, Wilcoxon, bootstrap interval, effect size."""

    n: int
    mean_baseline: float
    mean_candidate: float
    mean_diff: float
    t_statistic: float | None
    p_value: float
    wilcoxon_statistic: float | None
    wilcoxon_p: float
    ci_low: float
    ci_high: float
    effect_size: float | None  # Cohen's d_z; None when every difference is the same non-zero
    nonzero_pairs: int


def paired_test(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    n_bootstrap: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedTest:
    """Paired t-test, Wilcoxon signed-rank, bootstrap CI and effect size of candidate - baseline.

    Raises:
        ValueError: the samples differ in length or are empty.
    """
    import numpy as np
    from scipy import stats

    b, c = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    if b.shape != c.shape or b.size == 0:
        raise ValueError(
            f"paired samples must be non-empty and equal in length ({b.size}, {c.size})"
        )
    d = c - b
    nonzero = int(np.count_nonzero(d))
    sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
    t_stat, p = None, 1.0
    wil_stat, wil_p = None, 1.0
    if nonzero and sd > 0:
        res = stats.ttest_rel(c, b)
        t_stat, p = float(res.statistic), float(res.pvalue)
    elif nonzero and d.size > 1:  # every difference equal and non-zero: no doubt left
        t_stat, p = float(np.sign(d.mean()) * np.inf), 0.0
    if nonzero:
        wres = stats.wilcoxon(d, zero_method="wilcox")
        wil_stat, wil_p = float(wres.statistic), float(wres.pvalue)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n_bootstrap, d.size))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    effect = float(d.mean() / sd) if sd > 0 else (0.0 if not nonzero else None)
    return PairedTest(
        n=int(d.size),
        mean_baseline=float(b.mean()),
        mean_candidate=float(c.mean()),
        mean_diff=float(d.mean()),
        t_statistic=t_stat,
        p_value=p,
        wilcoxon_statistic=wil_stat,
        wilcoxon_p=wil_p,
        ci_low=float(lo),
        ci_high=float(hi),
        effect_size=effect,
        nonzero_pairs=nonzero,
    )


def binomial_tail(k: float, n: float, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), continued to counts that are not whole (counts on the
    user scale) through the regularized incomplete beta function: ``I_p(k, n - k + 1)``."""
    if k <= 0:
        return 1.0
    if p <= 0:
        return 0.0
    if p >= 1 or k > n:
        return 1.0 if p >= 1 else 0.0
    from scipy.special import betainc

    return float(betainc(k, n - k + 1, p))
