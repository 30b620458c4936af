"""Offline-online agreement per release: the gate's estimate on the golden set beside what the
canary measured in traffic, one ``release_outcomes`` row per release and workload.

The release flow writes the row (:func:`outcome_row`, :func:`write_outcome`) for every release
that reached the canary, whatever it concluded:

- offline: the gate's paired reward difference (candidate - baseline) with its bootstrap
  interval and p-value, the verified golden accuracy of both versions and the difference's
  interval (normal approximation of the paired per-item differences), and the golden set's
  version (:func:`tasks.golden.golden_version`);
- online, summed over the canary steps this run watched (each step reads both versions over
  the same interval, so the sum is one window for both): requests and the error share, each
  user's first vote on the reward's scale (up 1, neutral 0.5, down 0) and its mean, and the
  verifier's pass rate (``reward_judge`` >= 0.5) on the live answers the score stage scored
  whose traces fall in the canary's interval. The canary's traffic is scored by the next
  hourly run, after the release ended: ``flywheel report agreement`` fills the pass rates in
  once their windows are scored (:func:`refresh_verifier`).

The online outcome is *worse* when one of the three differences is significantly against the
candidate (its 95 % interval wholly below zero; for errors, above); the gate *gained* when its
paired test was significant (p < alpha) with a positive difference. A release *contradicts* the
gate when both hold. ``flywheel_release_contradictions_in_row{workload}`` counts the workload's
latest releases that contradicted it in a row; the alert ``GoldenGateContradicted`` fires at 2.

The canary's measurements (differences with their intervals, each version's traffic, the live
verifier) are in :mod:`tasks.release.gate.agreement_online`; the agreement over releases, its text
and plot in :mod:`tasks.release.gate.agreement_report`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict, cast

from infra.catalog import append_rows, replace_where, scan
from tasks.release.gate.agreement_online import (
    NONE,
    Z95,
    CanaryWatch,
    Diff,
    canary_sides,
    live_verifier,
    mean_diff,
    share_diff,
)
from tasks.reward.verifiers import DEFAULT_WORKLOAD

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyiceberg.catalog import Catalog

    from infra.metrics.stage import StageReport
    from infra.store import ObjectStore

TABLE = "release_outcomes"


class OutcomeRow(TypedDict):
    """A ``release_outcomes`` row (infra/catalog_schemas.py): one release of one workload."""

    release_id: str
    workload: str
    version: str
    baseline: str
    gate_decision: str | None
    outcome: str  # promoted | rolled_back | held | interrupted
    golden_version: str | None
    golden_items: int | None
    offline_reward_diff: float | None
    offline_reward_low: float | None
    offline_reward_high: float | None
    offline_p: float | None
    offline_gain: bool
    golden_accuracy_baseline: float | None
    golden_accuracy_candidate: float | None
    golden_accuracy_diff: float | None
    golden_accuracy_low: float | None
    golden_accuracy_high: float | None
    canary_start: datetime
    canary_end: datetime
    requests_candidate: float
    requests_stable: float
    error_share_candidate: float | None
    error_share_stable: float | None
    online_error_diff: float | None
    online_error_low: float | None
    online_error_high: float | None
    voters_candidate: float
    voters_stable: float
    feedback_candidate: float | None
    feedback_stable: float | None
    online_feedback_diff: float | None
    online_feedback_low: float | None
    online_feedback_high: float | None
    verifier_scored_candidate: int | None  # None until the canary is scored
    verifier_scored_stable: int | None
    verifier_pass_candidate: float | None
    verifier_pass_stable: float | None
    online_verifier_diff: float | None
    online_verifier_low: float | None
    online_verifier_high: float | None
    online_worse: bool
    contradicts: bool
    created_at: datetime


# ---- the row ----------------------------------------------------------------------------------


def golden_accuracy(gate: Mapping[str, Any]) -> tuple[float | None, float | None, Diff]:
    """The verified golden accuracy of baseline and candidate from the gate's golden-verifier
    check, and the paired difference's interval."""
    check = next((c for c in gate.get("checks") or [] if c["name"] == "golden_verifier"), None)
    extra = (check or {}).get("extra") or {}
    if "verified_accuracy_baseline" not in extra:
        return None, None, NONE
    base, cand = extra["verified_accuracy_baseline"], extra["verified_accuracy_candidate"]
    n, won, lost = extra.get("items") or 0, extra.get("won"), extra.get("lost")
    d = cand - base
    if not n or won is None or lost is None:
        return base, cand, Diff(d, None, None)
    var = max((won + lost) / n - d * d, 0.0)  # the per-item differences are -1, 0 or 1
    se = math.sqrt(var / n)
    return base, cand, Diff(d, d - Z95 * se, d + Z95 * se)


@dataclass(frozen=True, kw_only=True)
class Release:
    """One release as its ``release_outcomes`` row names it: its id, workload, candidate
    ``version`` against ``baseline``, and how it concluded (``outcome``)."""

    release_id: str
    workload: str | None
    version: str
    baseline: str
    outcome: str


def outcome_row(
    release: Release,
    *,
    gate: Mapping[str, Any],
    canary: CanaryWatch,
    alpha: float,
    created_at: datetime | None = None,
) -> OutcomeRow:
    """The ``release_outcomes`` row of one release (``gate``: the gate's summary, as
    ``report.json`` holds it; ``canary``: what its canary steps measured)."""
    test = gate.get("test") or {}
    acc_b, acc_c, acc = golden_accuracy(gate)
    cand, stable = canary_sides(canary.windows)
    row: dict[str, Any] = {
        "release_id": release.release_id,
        "workload": release.workload or DEFAULT_WORKLOAD,
        "version": release.version,
        "baseline": release.baseline,
        "gate_decision": gate.get("decision"),
        "outcome": release.outcome,
        "golden_version": gate.get("golden_version"),
        "golden_items": test.get("n"),
        "offline_reward_diff": test.get("mean_diff"),
        "offline_reward_low": test.get("ci_low"),
        "offline_reward_high": test.get("ci_high"),
        "offline_p": test.get("p_value"),
        "golden_accuracy_baseline": acc_b,
        "golden_accuracy_candidate": acc_c,
        "golden_accuracy_diff": acc.value,
        "golden_accuracy_low": acc.low,
        "golden_accuracy_high": acc.high,
        "canary_start": canary.start,
        "canary_end": canary.end,
        "requests_candidate": cand.requests,
        "requests_stable": stable.requests,
        "error_share_candidate": cand.error_share(),
        "error_share_stable": stable.error_share(),
        "voters_candidate": cand.voters,
        "voters_stable": stable.voters,
        "feedback_candidate": cand.feedback(),
        "feedback_stable": stable.feedback(),
        "created_at": created_at or datetime.now(UTC),
    }
    errors = share_diff(cand.errors, cand.requests, stable.errors, stable.requests)
    feedback = mean_diff(cand.votes, stable.votes)
    row.update(_diff_columns("error", errors))
    row.update(_diff_columns("feedback", feedback))
    out = cast("OutcomeRow", row)  # every column but the verifier's and the verdicts' now
    set_verifier(out, canary.verifier)
    p = test.get("p_value")
    out["offline_gain"] = bool(p is not None and p < alpha and (test.get("mean_diff") or 0) > 0)
    judge(out)
    return out


def _diff_columns(name: str, d: Diff) -> dict[str, float | None]:
    return {
        f"online_{name}_diff": d.value,
        f"online_{name}_low": d.low,
        f"online_{name}_high": d.high,
    }


def set_verifier(row: OutcomeRow, verifier: Mapping[str, tuple[int, int]] | None) -> None:
    """The verifier's pass rates of both versions over the canary (None: not scored yet)."""
    (nc, kc), (nb, kb) = (
        (verifier.get(row["version"], (0, 0)), verifier.get(row["baseline"], (0, 0)))
        if verifier is not None
        else ((0, 0), (0, 0))
    )
    row["verifier_scored_candidate"] = nc if verifier is not None else None
    row["verifier_scored_stable"] = nb if verifier is not None else None
    row["verifier_pass_candidate"] = kc / nc if nc else None
    row["verifier_pass_stable"] = kb / nb if nb else None
    d = share_diff(kc, nc, kb, nb)  # the columns _diff_columns("verifier", d) names
    row["online_verifier_diff"], row["online_verifier_low"] = d.value, d.low
    row["online_verifier_high"] = d.high


def judge(row: OutcomeRow) -> None:
    """``online_worse`` (an online difference significantly against the candidate) and
    ``contradicts`` (that, after a significant offline gain)."""
    worse = [
        row["online_feedback_high"] is not None and row["online_feedback_high"] < 0,
        row["online_verifier_high"] is not None and row["online_verifier_high"] < 0,
        row["online_error_low"] is not None and row["online_error_low"] > 0,
    ]
    row["online_worse"] = any(worse)
    row["contradicts"] = bool(row["offline_gain"] and row["online_worse"])


def online_diff(row: OutcomeRow) -> tuple[float | None, float | None, float | None, str]:
    """The online difference a release is plotted and ranked by: the users' feedback, else (no
    votes) the verifier's pass rate; with its interval and its name."""
    if row.get("online_feedback_diff") is not None:
        low, high = row["online_feedback_low"], row["online_feedback_high"]
        return row["online_feedback_diff"], low, high, "feedback"
    if row.get("online_verifier_diff") is not None:
        low, high = row["online_verifier_low"], row["online_verifier_high"]
        return row["online_verifier_diff"], low, high, "verifier"
    return None, None, None, "none"


# ---- the table --------------------------------------------------------------------------------


def read_outcomes(catalog: Catalog, workload: str | None = None) -> list[OutcomeRow]:
    """The ``release_outcomes`` rows (of ``workload``), oldest first."""
    from pyiceberg.expressions import EqualTo

    table = scan(catalog, TABLE, EqualTo("workload", workload) if workload else None)
    return sorted(table.to_pylist(), key=lambda r: r["created_at"])


def write_outcome(catalog: Catalog, row: OutcomeRow) -> list[OutcomeRow]:
    """Append ``row`` (a rerun replaces the release's row) and return the workload's rows,
    oldest first, with it."""
    from pyiceberg.expressions import And, EqualTo

    where = And(EqualTo("release_id", row["release_id"]), EqualTo("workload", row["workload"]))
    if any(r["release_id"] == row["release_id"] for r in read_outcomes(catalog, row["workload"])):
        replace_where(catalog, TABLE, where, [row])
    else:
        append_rows(catalog, TABLE, [row])
    return read_outcomes(catalog, row["workload"])


def in_a_row(rows: Sequence[OutcomeRow]) -> int:
    """How many of the latest ``rows`` contradicted the gate in a row."""
    n = 0
    for row in reversed(rows):
        if not row["contradicts"]:
            break
        n += 1
    return n


def report_outcome(report: StageReport, rows: Sequence[OutcomeRow]) -> None:
    """The latest release's gauges (``workload`` label): offline and online difference, whether
    it contradicted the gate, and the contradictions in a row."""
    latest = rows[-1]
    labels = {"workload": str(latest["workload"])}
    online, _, _, _ = online_diff(latest)
    if latest["offline_reward_diff"] is not None:
        report.gauge("flywheel_release_offline_diff", latest["offline_reward_diff"], **labels)
    if online is not None:
        report.gauge("flywheel_release_online_diff", online, **labels)
    report.gauge("flywheel_release_contradicts", float(latest["contradicts"]), **labels)
    report.gauge("flywheel_release_contradictions_in_row", float(in_a_row(rows)), **labels)


def refresh_verifier(catalog: Catalog, store: ObjectStore, rows: list[OutcomeRow]) -> int:
    """Fill in the verifier's pass rates of the rows whose canary windows are scored now (the
    row is rewritten, its verdict judged again); returns how many rows changed."""
    changed = 0
    for row in rows:
        if row["verifier_scored_candidate"] is not None:
            continue
        counts = live_verifier(
            store,
            since=row["canary_start"],
            until=row["canary_end"],
            versions=[row["version"], row["baseline"]],
            workload=None if row["workload"] == DEFAULT_WORKLOAD else row["workload"],
        )
        if counts is None:
            continue
        set_verifier(row, counts)
        judge(row)
        write_outcome(catalog, row)
        changed += 1
    return changed
