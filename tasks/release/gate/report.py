"""The gate's evidence: ``gates/<version>/report.json``, ``report.md`` and ``scores.png``
(score distributions and paired differences) in the object store. The markdown is also the
Prefect artifact of the release run, so the UI and the store show the same numbers."""

from __future__ import annotations

import io
import json
import math
from typing import TYPE_CHECKING, Any

from prefect import task

from infra.keys import gate_prefix
from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from infra.store import ObjectStore
    from tasks.release.gate.gate import GateResult


def report_json(result: GateResult) -> dict[str, Any]:
    """The summary plus the per-item pairs (the same numbers ``eval_results`` holds)."""
    data = result.summary()
    data["eval_results"] = {"table": "flywheel.eval_results", "run_id": result.run_id}
    data["items"] = [
        {
            "item_id": it.item_id,
            "slice": it.slice,
            "baseline_score": it.baseline_score,
            "candidate_score": it.candidate_score,
        }
        for it in result.items
    ]
    return json_safe(data)


def json_safe(value: Any) -> Any:
    """JSON-safe: non-finite floats (an infinite t statistic) become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def gate_evidence(result: GateResult, report_keys: dict[str, str]) -> dict[str, Any]:
    """The gate's numbers for the audit event and the state history (no answers)."""
    t = result.test
    evidence = {
        "decision": result.decision.value,
        "baseline": result.baseline,
        "n": t.n,
        "mean_baseline": t.mean_baseline,
        "mean_candidate": t.mean_candidate,
        "mean_diff": t.mean_diff,
        "p_value": t.p_value,
        "wilcoxon_p": t.wilcoxon_p,
        "ci": [t.ci_low, t.ci_high],
        "effect_size": t.effect_size,
        "reasons": result.reasons,
        "regressed_slices": [s.name for s in result.slices if s.regressed],
        "failed_checks": {c.name: c.value for c in result.checks if c.status == "fail"},
        "run_id": result.run_id,
        "report": report_keys.get("json"),
        "golden_version": result.golden_version,
        **({"workload": result.workload} if result.workload else {}),
        **({"noninferiority": result.noninferiority} if result.noninferiority else {}),
    }
    return dict(json_safe(evidence))


def _num(value: float | None, fmt: str = ".4f") -> str:
    return "n/a" if value is None else format(value, fmt)


def report_markdown(result: GateResult) -> str:
    """The gate report a person reads (report.md)."""
    t = result.test
    lines = [
        f"# Release gate: {result.version} vs {result.baseline}"
        + (f" (workload {result.workload})" if result.workload else ""),
        "",
        f"**Decision: {result.decision.value}**",
        "",
        *[f"- {r}" for r in result.reasons],
        "",
        *[f"> **Warning:** {w}\n" for w in result.warnings],
        "## Paired comparison (golden set, stage-2 reward)",
        "",
        "| | value |",
        "|---|---|",
        f"| golden set version | {result.golden_version or 'n/a'} |",
        f"| items | {t.n} (non-zero differences: {t.nonzero_pairs}) |",
        f"| baseline mean ({result.baseline}) | {t.mean_baseline:.4f} |",
        f"| candidate mean ({result.version}) | {t.mean_candidate:.4f} |",
        f"| mean difference | {t.mean_diff:+.4f} |",
        f"| 95% bootstrap CI | [{t.ci_low:+.4f}, {t.ci_high:+.4f}] |",
        f"| paired t-test | t = {_num(t.t_statistic, '.3f')}, p = {t.p_value:.3g} |",
        f"| Wilcoxon signed-rank | W = {_num(t.wilcoxon_statistic, '.1f')}, p = {t.wilcoxon_p:.3g} |",
        f"| effect size (Cohen's d_z) | {_num(t.effect_size, '.3f')} |",
        "",
        "## Slices",
        "",
        "| slice | n | baseline | candidate | difference | regressed |",
        "|---|---|---|---|---|---|",
        *[
            f"| {s.name} | {s.n} | {s.mean_baseline:.4f} | {s.mean_candidate:.4f} | "
            f"{s.diff:+.4f} | {'yes' if s.regressed else 'no'} |"
            for s in result.slices
        ],
        "",
        "## Reward-hacking and drift checks",
        "",
        "| check | status | value | threshold | detail |",
        "|---|---|---|---|---|",
        *[
            f"| {c.name} | {c.status} | {_num(c.value)} | {c.threshold:g} | {c.detail} |"
            for c in result.checks
        ],
        "",
        *noninferiority_lines(result.noninferiority),
        f"Generation failures: {result.errors or 'none'}. Per-item scores: table "
        f"`flywheel.eval_results`, run_id `{result.run_id}`.",
    ]
    return "\n".join(lines) + "\n"


def noninferiority_lines(ni: dict[str, Any] | None) -> list[str]:
    """The report's section of a non-inferiority release (none for one that must be better):
    the one-sided test with its interval, and the measured compute per request."""
    if not ni:
        return []
    t, c = ni["test"], ni["cost"]
    verdict = "non-inferior" if t["non_inferior"] else "inferior" if t["inferior"] else "not shown"
    return [
        f"## Non-inferiority (margin {t['margin']:g} points of {t['scale']})",
        "",
        "| | value |",
        "|---|---|",
        f"| items | {t['n']} |",
        f"| baseline / candidate | {t['mean_baseline']:.1f} / {t['mean_candidate']:.1f} |",
        f"| difference (points) | {t['mean_diff']:+.2f} |",
        f"| {t['confidence']:.0%} CI | [{t['ci_low']:+.2f}, {t['ci_high']:+.2f}] |",
        f"| one-sided p (H0: worse by >= margin) | {t['p_value']:.3g} ({verdict}) |",
        f"| compute per request, baseline | {1000 * c['baseline_s']:.2f} ms |",
        f"| compute per request, candidate | {1000 * c['candidate_s']:.2f} ms "
        f"({c['ratio']:.2f}x) |",
        "",
    ]


def report_plot(result: GateResult) -> bytes:
    """PNG: both score distributions, and the histogram of paired differences."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    base = [it.baseline_score for it in result.items]
    cand = [it.candidate_score for it in result.items]
    diffs = [c - b for b, c in zip(base, cand, strict=True)]
    fig = Figure(figsize=(10, 4), dpi=100)
    left, right = fig.subplots(1, 2)
    bins = [i / 20 for i in range(21)]
    left.hist(base, bins=bins, alpha=0.6, label=f"baseline {result.baseline}")
    left.hist(cand, bins=bins, alpha=0.6, label=f"candidate {result.version}")
    left.set(title="Reward per golden item", xlabel="reward", ylabel="items")
    left.legend()
    right.hist(diffs, bins=[i / 20 - 1 for i in range(41)], color="tab:purple")
    right.axvline(0, color="black", linewidth=0.8)
    right.axvline(result.test.mean_diff, color="tab:red", linestyle="--", label="mean")
    right.set(
        title=f"Paired differences (p = {result.test.p_value:.3g})",
        xlabel="candidate - baseline",
        ylabel="items",
    )
    right.legend()
    fig.suptitle(f"{result.version} vs {result.baseline}: {result.decision.value}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def write_report(store: ObjectStore, result: GateResult) -> dict[str, str]:
    """Write report.json, report.md and scores.png; returns {kind: key}."""
    prefix = gate_prefix(result.version)
    keys = {
        "json": prefix + "report.json",
        "md": prefix + "report.md",
        "png": prefix + "scores.png",
    }
    store.put(keys["png"], report_plot(result))
    store.put(keys["md"], report_markdown(result).encode())
    store.put(keys["json"], json.dumps(report_json(result), indent=1, allow_nan=False).encode())
    return keys


def read_report(store: ObjectStore, version: str) -> dict[str, Any]:
    """The stored ``report.json`` of a version's last gate run."""
    return dict(json.loads(store.get(gate_prefix(version) + "report.json")))


@task(**IO_RETRIES)
def write_report_task(store: ObjectStore, result: GateResult) -> dict[str, str]:
    """Returns the keys of the gate report's files in the object store."""
    return write_report(store, result)
