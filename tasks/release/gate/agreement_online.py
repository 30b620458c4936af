"""The canary's side of the offline-online agreement (:mod:`tasks.release.gate.agreement`): a
difference with its 95 % interval (of two means, of two shares), each version's traffic summed
over the canary steps (requests, errors, first votes), and the verifier's pass rates on the live
answers the score stage scored in the canary's interval."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from infra.errors import ObjectNotFound
from infra.keys import window_id
from tasks.reward.verifiers import DEFAULT_WORKLOAD

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from infra.store import ObjectStore

Z95 = 1.959963984540054
PASS_AT = 0.5  # a verifier score at or above this is a pass (the demo's verifiers say 0 or 1)
# the votes' values on the reward's scale (RouteStats.feedback_score)
VOTE_SCORE = {1: 1.0, 0: 0.5, -1: 0.0}


@dataclass
class Diff:
    """A difference (candidate - baseline) with its 95 % interval."""

    value: float | None
    low: float | None
    high: float | None


NONE = Diff(None, None, None)


def mean_diff(cand: tuple[float, float, float], base: tuple[float, float, float]) -> Diff:
    """Difference of two independent means of values in [0, 1] given each side's (n, sum, sum
    of squares), with a normal (Welch) interval; NONE when a side is empty. Each side's variance
    is at least that of one dissenting value in n + 1 (three votes alike are no proof of none
    other)."""
    (nc, sc, qc), (nb, sb, qb) = cand, base
    if nc <= 0 or nb <= 0:
        return NONE
    mc, mb = sc / nc, sb / nb
    var_c = max(qc / nc - mc * mc, nc / (nc + 1) ** 2)
    var_b = max(qb / nb - mb * mb, nb / (nb + 1) ** 2)
    se = math.sqrt(var_c / nc + var_b / nb)
    d = mc - mb
    return Diff(d, d - Z95 * se, d + Z95 * se)


def share_diff(k_c: float, n_c: float, k_b: float, n_b: float) -> Diff:
    """Difference of two shares (candidate - baseline) with a normal interval; each share's
    variance at least that of one event in n + 1 (so 0 of 100 against 0 of 100 is no proof)."""
    if n_c <= 0 or n_b <= 0:
        return NONE

    def var(k: float, n: float) -> float:
        p = min(max(k / n, 1 / (n + 1)), 1 - 1 / (n + 1))
        return p * (1 - p) / n

    d = k_c / n_c - k_b / n_b
    se = math.sqrt(var(k_c, n_c) + var(k_b, n_b))
    return Diff(d, d - Z95 * se, d + Z95 * se)


# ---- online: the canary's windows ------------------------------------------------------------


@dataclass
class Side:
    """One version's traffic over the canary: requests, errors and first votes."""

    requests: float = 0.0
    errors: float = 0.0
    voters: float = 0.0
    vote_sum: float = 0.0
    vote_sq: float = 0.0

    def add(self, stats: Mapping[str, Any]) -> None:
        """Add one step's stats (``RouteStats.as_dict()``)."""
        self.requests += float(stats.get("requests") or 0.0)
        self.errors += float(stats.get("errors") or 0.0)
        for value, n in (stats.get("feedback") or {}).items():
            score = VOTE_SCORE.get(int(value))
            if score is None:
                continue
            self.voters += float(n)
            self.vote_sum += float(n) * score
            self.vote_sq += float(n) * score * score

    @property
    def votes(self) -> tuple[float, float, float]:
        """(voters, sum, sum of squares) of the votes on the reward's scale."""
        return self.voters, self.vote_sum, self.vote_sq

    def feedback(self) -> float | None:
        """Mean vote on the reward's scale; None without votes."""
        return self.vote_sum / self.voters if self.voters > 0 else None

    def error_share(self) -> float | None:
        """Errors / requests; None without requests."""
        return self.errors / self.requests if self.requests > 0 else None


@dataclass(frozen=True, kw_only=True)
class CanaryWatch:
    """What one release's canary measured: each step's evidence (``windows``, as
    :func:`canary_sides` reads them), the interval the steps span, and the live verifier's
    counts in it per version (None: not scored yet; :func:`live_verifier`)."""

    windows: Sequence[Mapping[str, Any]]
    start: datetime
    end: datetime
    verifier: Mapping[str, tuple[int, int]] | None = None


def canary_sides(windows: Iterable[Mapping[str, Any]]) -> tuple[Side, Side]:
    """The candidate's and stable's traffic summed over the canary steps' evidence (each a
    step's ``{"candidate": ..., "stable": ...}``; a step without them is skipped)."""
    cand, stable = Side(), Side()
    for w in windows:
        if "candidate" in w and "stable" in w:
            cand.add(w["candidate"])
            stable.add(w["stable"])
    return cand, stable


def live_verifier(
    store: ObjectStore,
    *,
    since: datetime,
    until: datetime,
    versions: Sequence[str],
    workload: str | None = None,
) -> dict[str, tuple[int, int]] | None:
    """``{version: (scored, passed)}`` over the traces of ``versions`` created in
    ``[since, until]`` (of ``workload``, None: every workload's) that the score stage scored
    with a verifier's verdict; None while a window the interval touches is not scored yet."""
    counts = {v: [0, 0] for v in versions}
    hour = since.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    while hour <= until:
        window = window_id(hour)
        hour += timedelta(hours=1)
        try:
            from tasks.datasets import read_rollouts, read_scores

            rollouts = read_rollouts(store, window)
            scores = read_scores(store, window)
        except ObjectNotFound:
            return None
        verdict = dict(
            zip(
                scores.column("trace_id").to_pylist(),
                scores.column("reward_judge").to_pylist(),
                strict=True,
            )
        )
        cols = ("trace_id", "model_version", "created_at", "workload")
        for tid, version, at, wl in zip(
            *(rollouts.column(c).to_pylist() for c in cols), strict=True
        ):
            if version not in counts or not since <= at <= until:
                continue
            if workload and (wl or DEFAULT_WORKLOAD) != workload:
                continue
            if (score := verdict.get(tid)) is None:
                continue
            counts[version][0] += 1
            counts[version][1] += int(score >= PASS_AT)
    return {v: (n, k) for v, (n, k) in counts.items()}
