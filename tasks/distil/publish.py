"""A distil run's training and publication (:func:`distil_and_publish`), and what it reports:
its audit event and summary artifact (:func:`record_result`), its golden accuracy gauges."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect.artifacts import create_markdown_artifact

from infra.audit import record_event
from infra.catalog import current_snapshot_id
from tasks.distil.run import DistilPlan, DistilResult, student_lineage, train_student, trained
from tasks.distil.trainer import DistilConfig
from tasks.train.checkpoints import evaluate_golden_dirs, publish_checkpoint, scratch_dir
from tasks.train.lineage import card_markdown

if TYPE_CHECKING:
    from infra.metrics.stage import StageReport
    from infra.runtime import Runtime


def distil_and_publish(
    rt: Runtime,
    plan: DistilPlan,
    *,
    max_steps: int | None = None,
    config: DistilConfig | None = None,
) -> DistilResult:
    """Train the plan's student (``config``: the settings', ``max_steps`` when given),
    evaluate it beside its teacher on the workload's golden set, and publish it as the next
    version with its lineage and model card."""
    config = config or DistilConfig.from_settings(rt.settings.distil, steps=max_steps)
    with scratch_dir(rt.settings.home_dir / "cache" / "distil") as work:
        outcome = train_student(rt, plan, config, work)
        evaluation = evaluate_golden_dirs(
            plan.teacher_dir, outcome.output_dir, settings=rt.settings, workload=plan.workload
        )
        lineage = student_lineage(
            rt,
            plan,
            config=config,
            outcome=outcome,
            evaluation=evaluation,
            consent_snapshot_id=current_snapshot_id(rt.catalog, "consent"),
        )
        lineage = publish_checkpoint(rt.store, outcome.output_dir, lineage=lineage)
    return trained(plan, lineage, outcome)


def report_accuracy(report: StageReport, result: DistilResult) -> None:
    """Golden accuracy of the teacher and the student (``flywheel_train_golden_accuracy``)."""
    for model, value in (
        ("teacher", result.teacher_accuracy),
        ("student", result.student_accuracy),
    ):
        if value is not None:
            report.gauge("flywheel_train_golden_accuracy", value, model=model)


def record_result(rt: Runtime, plan: DistilPlan, result: DistilResult) -> None:
    """The run's audit event (``model_distilled`` or ``distil_skipped``: ids and counts only)
    and its ``distil-summary`` artifact (the model card, or why it skipped)."""
    details = {k: v for k, v in vars(result).items() if k not in ("lineage", "message")}
    record_event(
        rt.catalog,
        event_type="model_distilled" if result.version else "distil_skipped",
        actor="distil",
        subject=result.version or plan.run_id,
        details=details,
    )
    markdown = card_markdown(result.lineage) if result.lineage else f"# distil: {result.message}"
    create_markdown_artifact(key="distil-summary", markdown=markdown, description=result.message)
