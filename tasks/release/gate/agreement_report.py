"""Agreement over releases (:mod:`tasks.release.gate.agreement`'s rows): how often the gate's
offline estimate and the canary's online difference agree in sign and rank, the table and
summary ``flywheel report agreement`` prints, its plot, and the rows JSON-ready."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from infra.traces.conversation import JsonObject
from tasks.release.gate.agreement import OutcomeRow, in_a_row, online_diff

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def agreement(rows: Sequence[OutcomeRow]) -> dict[str, Any]:
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


def agreement_text(rows: Sequence[OutcomeRow], summary: Mapping[str, Any]) -> str:
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


def agreement_plot(rows: Sequence[OutcomeRow], path: str) -> str | None:
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


def json_rows(rows: Sequence[OutcomeRow]) -> list[JsonObject]:
    """The rows JSON-ready (times as ISO strings)."""
    return json.loads(json.dumps(list(rows), default=lambda o: o.isoformat()))
