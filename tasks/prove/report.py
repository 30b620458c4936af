"""What ``flywheel prove`` shows: the table it prints, ``report.md``, ``chart.png`` and
``ablation.json`` (the numbers, read back by the auto method choice)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.train.evidence import ABLATION_FILE

if TYPE_CHECKING:
    from tasks.prove.run import Ablation


def pct(x: float) -> str:
    """A share as the CLI and every summary print it: ``49.5%``."""
    return f"{x:.1%}"


def decisions(values: list[str]) -> str:
    """The gate's decisions per seed, counted (``3 proceed, 1 review``)."""
    short = {"PROCEED_TO_SHADOW": "proceed", "MANUAL_REVIEW": "review", "ROLLBACK": "rollback"}
    counts: dict[str, int] = {}
    for v in values:
        counts[short.get(v, v)] = counts.get(short.get(v, v), 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items())


def table_rows(ab: Ablation) -> list[list[str]]:
    """The rows of the per-arm table."""
    rows = [["v0 (base)", pct(ab.base_accuracy), "", "", "", ""]]
    for a in ab.arms:
        iv = a.interval
        rows.append(
            [
                a.arm,
                pct(iv.mean),
                f"[{pct(iv.low)}, {pct(iv.high)}]",
                " ".join(f"{100 * x:.1f}" for x in a.accuracies),
                f"{100 * (iv.mean - ab.base_accuracy):+.1f}"
                + (" (regressed)" if a.regressed else ""),
                decisions(a.decisions),
            ]
        )
    return rows


HEADER = ["arm", "golden acc.", "95 % CI", "per seed", "vs v0 (points)", "gate vs v0"]


def verdict(ab: Ablation, alpha: float = 0.05) -> str:
    """The one-sentence result of loop against the shuffled control."""
    c = ab.comparison
    better = c.mean_diff > 0 and c.t_p < alpha
    word = "beats" if better else "does NOT beat"
    return (
        f"loop {word} the shuffled-reward control: {100 * c.mean_diff:+.1f} points "
        f"[{100 * c.ci_low:+.1f}, {100 * c.ci_high:+.1f}], paired t-test on {c.items} golden "
        f"items p = {c.t_p:.2g} (Wilcoxon p = {c.wilcoxon_p:.2g}; seed-paired t-test over "
        f"{c.seeds} seeds p = {'n/a' if c.seed_t_p is None else f'{c.seed_t_p:.2g}'})"
    )


def text_table(ab: Ablation) -> str:
    """The per-arm table as aligned text (what flywheel prove prints)."""
    rows = [HEADER, *table_rows(ab)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    t = ab.traffic
    head = (
        f"flywheel prove: {len(ab.arms)} arms x {len(ab.seeds)} seeds in {ab.wall_s:.0f} s "
        f"({ab.workers} workers, {ab.load.get('cpus')} CPUs, load {ab.load.get('loadavg')}); "
        f"traffic {t['prompts']} prompts x {len(t['temperatures'])} temperatures -> "
        f"{t['pairs']} pairs, {t['singles']} good single answers; "
        f"{ab.budget['max_steps']} steps of {ab.budget['batch_size']} each"
    )
    return "\n".join([head, *lines, verdict(ab)])


def markdown(ab: Ablation, chart: str | None) -> str:
    """The ablation report (report.md)."""
    t, b, c = ab.traffic, ab.budget, ab.comparison
    md = [
        "# flywheel prove: does the loop's reward make the model better?",
        "",
        f"Base model **{ab.base_version}**: {pct(ab.base_accuracy)} greedy golden accuracy on "
        f"{ab.golden_items} held-out golden items (disjoint from all training data).",
        "",
        "## Verdict",
        "",
        verdict(ab),
        "",
        "## Arms",
        "",
        "| " + " | ".join(HEADER) + " | what it trains on |",
        "|" + "---|" * (len(HEADER) + 1),
    ]
    for row, arm in zip(table_rows(ab), [None, *ab.arms], strict=True):
        what = "" if arm is None else f"{arm.label}; {arm.train_items} items"
        md.append("| " + " | ".join(row) + f" | {what} |")
    md += [
        "",
        "Interval: 95 % Student-t over the seeds (the training runs' spread)"
        if len(ab.seeds) > 1
        else "Interval: 95 % Wilson over the golden items (one seed).",
        "`gate vs v0`: the release gate's decision rule (paired test, reject ratio, drift "
        "checks) on the golden verifier's scores, per seed. `regressed`: mean below v0.",
    ]
    if chart:
        md += ["", f"![golden accuracy per arm]({chart})"]
    md += [
        "",
        "## Loop vs shuffled-reward control",
        "",
        "The control trains on exactly the loop's preference pairs with chosen and rejected "
        "swapped on a seeded coin flip each: same prompts, same answers, same budget; only the "
        "reward's ranking is gone. So any gap is what the reward contributes.",
        "",
        f"- paired on the {c.items} golden items (each item's score averaged over the "
        f"{c.seeds} seeds): mean difference {100 * c.mean_diff:+.2f} points, 95 % CI "
        f"[{100 * c.ci_low:+.2f}, {100 * c.ci_high:+.2f}], paired t-test p = {c.t_p:.3g}, "
        f"Wilcoxon signed-rank p = {c.wilcoxon_p:.3g}; items better / worse: "
        f"{c.wins} / {c.losses}",
        f"- paired on seeds (n - 1 = {max(0, c.seeds - 1)} degrees of freedom): p = "
        + ("n/a" if c.seed_t_p is None else f"{c.seed_t_p:.3g}"),
        "",
        "Why items: both arms answer the same golden items, so item difficulty, the largest "
        "source of variance, cancels in the per-item difference, and 400 pairs give a valid "
        "test with few seeds; the seeds' spread is inside each item's mean and shows in the "
        "per-arm intervals.",
        "",
        "## Setup",
        "",
        f"- shared traffic (sampled once from {ab.base_version}): {t['prompts']} prompts at "
        f"temperatures {t['temperatures']} -> {t['answers']} answers, mean reward "
        f"{t['mean_reward']}, {pct(t['correct_share'])} correct; selected by stage 4: "
        f"{t['pairs']} preference pairs, {t['singles']} good single answers, "
        f"{t['prompt_groups']} prompt groups",
        f"- same budget for every arm: {b['max_steps']} steps x batch {b['batch_size']}, "
        f"learning rate {b['learning_rate']}, beta {b['beta']}; seeds {ab.seeds}",
        f"- wall time {ab.wall_s:.0f} s ({ab.phases_s}); {ab.workers} worker processes on "
        f"{ab.load.get('cpus')} CPUs; load average at the end {ab.load.get('loadavg')}",
        "",
        "| arm | seed | golden acc. | gate | checks | train s | eval s | items | chars |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    for r in sorted(ab.runs, key=lambda r: (r.arm, r.seed)):
        checks = ", ".join(f"{k} {v}" for k, v in sorted(r.checks.items()))
        md.append(
            f"| {r.arm} | {r.seed} | {pct(r.accuracy)} | {r.decision} | {checks} | "
            f"{r.train_s:.0f} | {r.eval_s:.0f} | {r.train_items} | {r.mean_answer_chars:.1f} |"
        )
    return "\n".join(md) + "\n"


def chart_png(ab: Ablation, path: Path) -> Path:
    """Bars of mean golden accuracy per arm with their 95 % interval, v0 as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [a.arm for a in ab.arms]
    means = [100 * a.interval.mean for a in ab.arms]
    # a Wilson interval (one seed) at 0 % or 100 % ends at the mean up to rounding, and
    # matplotlib refuses an error bar of -1e-17
    err = [
        [max(0.0, 100 * (a.interval.mean - a.interval.low)) for a in ab.arms],
        [max(0.0, 100 * (a.interval.high - a.interval.mean)) for a in ab.arms],
    ]
    colours = [
        "#2b8a3e" if n == "loop" else "#868e96" if n == "shuffled" else "#4c6ef5" for n in names
    ]
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    ax.bar(names, means, yerr=err, capsize=5, color=colours)
    for i, a in enumerate(ab.arms):
        ax.scatter(
            [i] * len(a.accuracies), [100 * x for x in a.accuracies], color="black", s=10, zorder=3
        )
    ax.axhline(
        100 * ab.base_accuracy, color="#e03131", linestyle="--", label=f"{ab.base_version} (base)"
    )
    ax.set_ylabel("golden accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"same traffic, same budget, {len(ab.seeds)} seeds (95 % CI)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def ablation_json(ab: Ablation) -> dict[str, Any]:
    """The numbers, for scripts and for the auto method choice."""
    data = asdict(ab)
    for run in data["runs"]:
        run.pop("scores", None)  # 400 numbers per run: in the report's statistics already
    return data


def write_report(ab: Ablation, out_dir: Path) -> dict[str, Path]:
    """``report.md``, ``chart.png`` and ``ablation.json`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    chart = chart_png(ab, out_dir / "chart.png")
    (out_dir / "report.md").write_text(markdown(ab, chart.name))
    (out_dir / ABLATION_FILE).write_text(json.dumps(ablation_json(ab), indent=2, default=str))
    return {"report": out_dir / "report.md", "chart": chart, "json": out_dir / ABLATION_FILE}
