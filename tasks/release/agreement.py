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
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from infra.catalog import append_rows, replace_where, scan
from infra.errors import ObjectNotFound
from infra.keys import window_id
from tasks.reward.verifiers import DEFAULT_WORKLOAD

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from pyiceberg.catalog import Catalog

    from infra.metrics import StageReport
    from infra.store import ObjectStore

TABLE = "release_outcomes"
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


def outcome_row(
    *,
    release_id: str,
    workload: str | None,
    version: str,
    baseline: str,
    outcome: str,
    gate: Mapping[str, Any],
    windows: Sequence[Mapping[str, Any]],
    canary_start: datetime,
    canary_end: datetime,
    verifier: Mapping[str, tuple[int, int]] | None,
    alpha: float,
    created_at: datetime | None = None,
) -> dict[str, Any]:
    """The ``release_outcomes`` row of one release (``gate``: the gate's summary, as
    ``report.json`` holds it; ``windows``: each canary step's evidence)."""
    test = gate.get("test") or {}
    acc_b, acc_c, acc = golden_accuracy(gate)
    cand, stable = canary_sides(windows)
    row: dict[str, Any] = {
        "release_id": release_id,
        "workload": workload or DEFAULT_WORKLOAD,
        "version": version,
        "baseline": baseline,
        "gate_decision": gate.get("decision"),
        "outcome": outcome,
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
        "canary_start": canary_start,
        "canary_end": canary_end,
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
    set_verifier(row, verifier)
    p = test.get("p_value")
    row["offline_gain"] = bool(p is not None and p < alpha and (test.get("mean_diff") or 0) > 0)
    judge(row)
    return row


def _diff_columns(name: str, d: Diff) -> dict[str, float | None]:
    return {
        f"online_{name}_diff": d.value,
        f"online_{name}_low": d.low,
        f"online_{name}_high": d.high,
    }


def set_verifier(row: dict[str, Any], verifier: Mapping[str, tuple[int, int]] | None) -> None:
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
    row.update(_diff_columns("verifier", share_diff(kc, nc, kb, nb)))


def judge(row: dict[str, Any]) -> None:
    """``online_worse`` (an online difference significantly against the candidate) and
    ``contradicts`` (that, after a significant offline gain)."""
    worse = [
        row["online_feedback_high"] is not None and row["online_feedback_high"] < 0,
        row["online_verifier_high"] is not None and row["online_verifier_high"] < 0,
        row["online_error_low"] is not None and row["online_error_low"] > 0,
    ]
    row["online_worse"] = any(worse)
    row["contradicts"] = bool(row["offline_gain"] and row["online_worse"])


def online_diff(row: Mapping[str, Any]) -> tuple[float | None, float | None, float | None, str]:
    """The online difference a release is plotted and ranked by: the users' feedback, else (no
    votes) the verifier's pass rate; with its interval and its name."""
    for name in ("feedback", "verifier"):
        if row.get(f"online_{name}_diff") is not None:
            return (
                row[f"online_{name}_diff"],
                row[f"online_{name}_low"],
                row[f"online_{name}_high"],
                name,
            )
    return None, None, None, "none"


# ---- the table --------------------------------------------------------------------------------


def read_outcomes(catalog: Catalog, workload: str | None = None) -> list[dict[str, Any]]:
    """The ``release_outcomes`` rows (of ``workload``), oldest first."""
    from pyiceberg.expressions import EqualTo

    table = scan(catalog, TABLE, EqualTo("workload", workload) if workload else None)
    return sorted(table.to_pylist(), key=lambda r: r["created_at"])


def write_outcome(catalog: Catalog, row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Append ``row`` (a rerun replaces the release's row) and return the workload's rows,
    oldest first, with it."""
    from pyiceberg.expressions import And, EqualTo

    where = And(EqualTo("release_id", row["release_id"]), EqualTo("workload", row["workload"]))
    if any(r["release_id"] == row["release_id"] for r in read_outcomes(catalog, row["workload"])):
        replace_where(catalog, TABLE, where, [row])
    else:
        append_rows(catalog, TABLE, [row])
    return read_outcomes(catalog, row["workload"])


def in_a_row(rows: Sequence[Mapping[str, Any]]) -> int:
    """How many of the latest ``rows`` contradicted the gate in a row."""
    n = 0
    for row in reversed(rows):
        if not row["contradicts"]:
            break
        n += 1
    return n


def report_outcome(report: StageReport, rows: Sequence[Mapping[str, Any]]) -> None:
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


def refresh_verifier(catalog: Catalog, store: ObjectStore, rows: list[dict[str, Any]]) -> int:
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


# ---- agreement over releases --------------------------------------------------------------


def agreement(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Over the releases with both an offline and an online difference: how many, the share
    whose signs agree, and Spearman's rank correlation (None under three releases)."""
    pairs: list[tuple[float, float]] = []
    for r in rows:
        online = online_diff(r)[0]
        if r["offline_reward_diff"] is not None and online is not None:
            pairs.append((float(r["offline_reward_diff"]), online))
    signs = [_sign(a) == _sign(b) for a, b in pairs]
    rho = None
    if len(pairs) >= 3:
        from scipy.stats import spearmanr

        value = spearmanr([a for a, _ in pairs], [b for _, b in pairs]).statistic
        rho = None if value is None or math.isnan(float(value)) else float(value)
    return {
        "releases": len(rows),
        "compared": len(pairs),
        "sign_agreement": sum(signs) / len(signs) if signs else None,
        "spearman": rho,
        "contradictions": sum(bool(r["contradicts"]) for r in rows),
        "contradictions_in_row": in_a_row(rows),
    }


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _num(x: Any, fmt: str = "+.3f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _interval(value: Any, low: Any, high: Any) -> str:
    if value is None:
        return "n/a"
    if low is None or high is None:
        return _num(value)
    return f"{value:+.3f} [{low:+.3f}, {high:+.3f}]"


def agreement_text(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> str:
    """The releases side by side and the agreement over them (what the CLI prints)."""
    head = (
        "workload  release  vs  gate  outcome  golden  offline reward diff  golden accuracy "
        "diff  online feedback diff  online verifier diff  online error diff  contradicts"
    )
    lines = [head]
    for r in rows:
        lines.append(
            "  ".join(
                [
                    str(r["workload"]),
                    str(r["version"]),
                    str(r["baseline"]),
                    str(r["gate_decision"]),
                    str(r["outcome"]),
                    str(r["golden_version"]),
                    _interval(
                        r["offline_reward_diff"], r["offline_reward_low"], r["offline_reward_high"]
                    ),
                    _interval(
                        r["golden_accuracy_diff"],
                        r["golden_accuracy_low"],
                        r["golden_accuracy_high"],
                    ),
                    _interval(
                        r["online_feedback_diff"],
                        r["online_feedback_low"],
                        r["online_feedback_high"],
                    ),
                    _interval(
                        r["online_verifier_diff"],
                        r["online_verifier_low"],
                        r["online_verifier_high"],
                    ),
                    _interval(
                        r["online_error_diff"], r["online_error_low"], r["online_error_high"]
                    ),
                    "YES" if r["contradicts"] else "no",
                ]
            )
        )
    s = summary
    lines.append(
        f"{s['releases']} release(s), {s['compared']} with both differences: sign agreement "
        f"{_num(s['sign_agreement'], '.0%')}, rank correlation (Spearman) {_num(s['spearman'], '+.2f')}, "
        f"{s['contradictions']} contradicted the gate ({s['contradictions_in_row']} in a row at the end)"
    )
    return "\n".join(lines)


def agreement_plot(rows: Sequence[Mapping[str, Any]], path: str) -> str | None:
    """Offline reward difference against online difference, one point per release with both
    intervals, written to ``path`` as PNG; None (nothing written) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 5))
    for r in rows:
        x, y = r["offline_reward_diff"], online_diff(r)
        if x is None or y[0] is None:
            continue
        xerr = _err(x, r["offline_reward_low"], r["offline_reward_high"])
        yerr = _err(y[0], y[1], y[2])
        color = "tab:red" if r["contradicts"] else "tab:blue"
        ax.errorbar([x], [y[0]], xerr=xerr, yerr=yerr, fmt="o", color=color, capsize=3)
        ax.annotate(f"{r['workload']}/{r['version']}", (x, y[0]), fontsize=8)
    ax.axhline(0, color="grey", lw=0.8)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("offline: golden reward difference (candidate - baseline)")
    ax.set_ylabel("online: canary difference (feedback, else verifier pass rate)")
    ax.set_title("Gate vs canary, one point per release (red: contradicted)")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def _err(v: float, low: float | None, high: float | None) -> list[list[float]] | None:
    if low is None or high is None:
        return None
    return [[max(v - low, 0.0)], [max(high - v, 0.0)]]


def json_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows JSON-ready (times as ISO strings)."""
    return json.loads(json.dumps(list(rows), default=lambda o: o.isoformat()))
