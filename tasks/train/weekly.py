"""What the weekly ``train-and-release`` run (:mod:`flows.weekly`) did for each workload
(:class:`WorkloadRun`), the workloads it skipped for too little data, and its summary
artifact (ids and counts only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from prefect.artifacts import create_markdown_artifact

if TYPE_CHECKING:
    from tasks.release.machine.outcome import ReleaseOutcome
    from tasks.train.readiness import WorkloadCounts
    from tasks.train.run import TrainRunResult


@dataclass(kw_only=True)
class WorkloadRun:
    """One workload's week: ``outcome`` is the release's (promoted, held, rolled_back, ...),
    or ``skipped`` (training skipped: ``message`` says why) or ``failed`` (the error's type)."""

    workload: str
    examples: int
    outcome: str
    message: str = ""
    train: TrainRunResult | None = None
    release: ReleaseOutcome | None = None


def skipped_runs(counts: WorkloadCounts) -> list[WorkloadRun]:
    """The workloads with too little data this week, each skipped with its count."""
    return [
        WorkloadRun(
            workload=w,
            examples=n,
            outcome="skipped",
            message=f"skipped: {n} examples < minimum {counts.minimum}",
        )
        for w, n in counts.short().items()
    ]


def weekly_summary(runs: list[WorkloadRun]) -> None:
    """The weekly summary artifact: one row per workload (ids and counts only)."""
    lines = ["| workload | examples | candidate | outcome | detail |", "|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: r.workload):
        version = r.train.version if r.train and r.train.version else "-"
        detail = r.message.replace("|", "/").replace("\n", " ")
        lines.append(f"| {r.workload} | {r.examples} | {version} | {r.outcome} | {detail} |")
    create_markdown_artifact(
        key="weekly-summary", markdown="\n".join(lines), description="weekly run per workload"
    )
