"""One ``train`` run (:mod:`flows.train`; the erasure replacement trains through it too): what it
trains (:class:`TrainRun`, planned by :func:`plan_run`), the training and publication of the
next version with its lineage (:func:`train_selection`), the run's result, trained or skipped,
with its audit event, its metrics, its progress and summary artifacts and its log line."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    update_progress_artifact,
)
from prefect.utilities.annotations import quote

from infra.audit import record_event
from infra.catalog import current_snapshot_id
from infra.metrics.stage import StageReport
from infra.runtime import Runtime
from infra.serving.models import model_cache_root
from tasks.train.checkpoints import (
    evaluate_task,
    fetch_base_task,
    is_demo_model,
    pick_base_version,
    publish_task,
    published_runs,
    scratch_dir,
)
from tasks.train.config import TrainConfig
from tasks.train.lineage import Lineage, build_lineage, card_markdown
from tasks.train.methods import Data, MethodChoice
from tasks.train.pairs import Selection, write_pairs_task
from tasks.train.plan import TrainRun, plan_training_task
from tasks.train.trainer import TrainOutcome, progress_callback, train_task


@dataclass(kw_only=True)
class TrainRunResult:
    """What one train run did: ``status`` is "trained" or "skipped" (with ``message`` saying
    why, e.g. "skipped: 12 pairs < minimum 50"). Counts and ids only, no personal data."""

    status: Literal["trained", "skipped"]
    message: str
    train_run: str
    base_version: str
    method: str | None
    pairs: int
    counts: dict[str, int] = field(default_factory=dict)
    version: str | None = None
    golden_accuracy_base: float | None = None
    golden_accuracy: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    lineage: Lineage | None = None
    workload: str | None = None  # trained on this workload's rows only (None: every workload)


def plan_run(
    rt: Runtime,
    run_id: str,
    *,
    base_version: str | None,
    method: str | None,
    workload: str | None,
) -> TrainRun:
    """The run's base (``base_version``, else the workload's stable version) fetched, and
    its training plan: the rows of the buffer (``workload``'s only when named) and the
    method (``method``, else the settings'; auto: by data size)."""
    started = datetime.now(UTC)
    base = base_version or pick_base_version(rt.store, workload)
    base_dir = fetch_base_task(rt.store, base, cache_root=model_cache_root(rt.settings))
    plan = plan_training_task(
        rt.catalog,
        settings=cast(Any, quote(rt.settings)),  # quoted: Prefect would walk its fields
        base_version=base,
        base_dir=base_dir,
        method=method,
        workload=workload,
    )
    return TrainRun(
        run_id=run_id,
        base=base,
        base_dir=base_dir,
        choice=plan.choice,
        selection=plan.selection,
        started=started,
    )


def run_config(rt: Runtime, run: TrainRun, *, max_steps: int | None) -> TrainConfig:
    """The run's training configuration: the settings' for its chosen method (the demo's
    own when the base is the demo model), ``max_steps`` when given."""
    if run.choice.method is None:
        raise ValueError(f"nothing to train: {run.choice.reason}")
    return TrainConfig.from_settings(
        rt.settings.train,
        method=run.choice.method,
        max_steps=max_steps,
        demo_base=is_demo_model(run.base_dir),
    )


def train_selection(
    rt: Runtime, report: StageReport, run: TrainRun, config: TrainConfig
) -> TrainRunResult:
    """Train ``config`` on ``run``'s selection from its base and publish the next version with
    its lineage (the ``train`` flow, and the erasure replacement on its own selection)."""
    run_id, base, base_dir = run.run_id, run.base, run.base_dir
    choice, selection = run.choice, run.selection
    pairs_sid = None
    if config.method == "dpo":
        pairs_sid = write_pairs_task(
            rt.catalog,
            train_run=run_id,
            pairs=selection.pairs,
            published_runs=published_runs(rt.store),
        )
    consent_sid = current_snapshot_id(rt.catalog, "consent")
    progress = progress_artifact_callback(config)
    data: Data = {"pairs": selection.pairs, "sft": selection.sft, "prompts": selection.prompts}
    with scratch_dir(rt.settings.home_dir / "cache" / "train") as work:
        outcome = train_task(
            base_dir,
            work / "model",
            config=config,
            data=data,
            callbacks=[progress],
            # GRPO: the judge or verifier stage 2 uses; quoted, as Prefect would read the
            # settings as a collection (LangfuseSettings.keys takes a role)
            reward=cast(Any, quote(rt.settings)),
            base_version=base,
        )
        evaluation = evaluate_task(
            base_dir,
            outcome.output_dir,
            settings=cast(Any, quote(rt.settings)),
            workload=selection.workload,
        )
        lineage = build_lineage(
            run,
            config=config,
            pairs_snapshot_id=pairs_sid,
            consent_snapshot_id=consent_sid,
            outcome=outcome,
            evaluation=evaluation,
            settings=rt.settings,
        )
        lineage = publish_task(rt.store, outcome.output_dir, lineage=lineage)
    report_training(report, outcome=outcome, lineage=lineage)
    return trained_result(rt, choice=choice, selection=selection, outcome=outcome, lineage=lineage)


def progress_artifact_callback(config: TrainConfig) -> Any:
    """A trainer callback that moves a Prefect progress artifact (0-100 %)."""
    logger = get_run_logger()
    artifact = cast(
        UUID,
        create_progress_artifact(
            0.0, key="train-progress", description=f"{config.method}: {config.max_steps} steps"
        ),
    )

    def report(step: int, total: int, logs: dict[str, float]) -> None:
        loss = logs.get("loss")
        note = f"{config.method}: step {step}/{total}" + (f", loss {loss:.4f}" if loss else "")
        try:
            update_progress_artifact(artifact, 100.0 * step / max(1, total), description=note)
        except Exception as exc:  # noqa: BLE001 - a progress bar is never worth a training run
            logger.warning("progress artifact not updated: %s", type(exc).__name__)

    return progress_callback(report)


def skipped_result(rt: Runtime, run: TrainRun) -> TrainRunResult:
    """Audit a run that trains nothing (``train_skipped``: why, the counts) and return its
    result, "skipped" with the reason."""
    run_id, base, choice, selection = run.run_id, run.base, run.choice, run.selection
    record_event(
        rt.catalog,
        event_type="train_skipped",
        actor="train",
        subject=run_id,
        details={
            "reason": choice.reason,
            "counts": selection.counts,
            "base_version": base,
            **workload_details(selection),
        },
    )
    return TrainRunResult(
        status="skipped",
        message=choice.reason,
        train_run=run_id,
        base_version=base,
        method=None,
        pairs=len(selection.pairs),
        counts=selection.counts,
        workload=selection.workload,
    )


def workload_details(selection: Selection) -> dict[str, str]:
    """The audit details naming the run's workload (none for a run over every workload)."""
    return {"workload": selection.workload} if selection.workload else {}


def trained_result(
    rt: Runtime,
    *,
    choice: MethodChoice,
    selection: Selection,
    outcome: TrainOutcome,
    lineage: Lineage,
) -> TrainRunResult:
    """Audit the published version (``model_trained``: its lineage's ids and counts, golden
    accuracy before and after) and return the run's result, "trained"."""
    ev, data, version = lineage.evaluation, lineage.data, lineage.version
    pairs = data.preference_pairs
    record_event(
        rt.catalog,
        event_type="model_trained",
        actor="train",
        subject=str(version),
        details={
            "train_run": lineage.train_run,
            "base_version": lineage.base_version,
            "method": outcome.method,
            "reason": choice.reason,
            "counts": selection.counts,
            "training_examples_snapshot_ids": data.training_examples.snapshot_ids,
            "preference_pairs": pairs.model_dump() if pairs else None,
            "golden_accuracy": [ev.base_accuracy, ev.accuracy],
            **workload_details(selection),
        },
    )
    message = (
        f"trained {version} from {lineage.base_version} with {outcome.method} ({choice.reason}); "
        f"golden accuracy {ev.base_accuracy:.3f} -> {ev.accuracy:.3f}"
    )
    return TrainRunResult(
        status="trained",
        message=message,
        train_run=lineage.train_run,
        base_version=lineage.base_version,
        method=outcome.method,
        pairs=len(selection.pairs),
        counts=selection.counts,
        version=version,
        golden_accuracy_base=ev.base_accuracy,
        golden_accuracy=ev.accuracy,
        metrics=outcome.metrics,
        lineage=lineage,
        workload=lineage.workload,
    )


def report_selection(report: StageReport, selection: Selection) -> None:
    """The selection's record counts (read, paired, left out and why) and its pair count."""
    counts = selection.counts
    report.records("in", counts.get("read", 0))
    report.records("out", counts.get("pairs", 0))
    for reason in ("decontaminated", "dropped_opted_out", "dropped_unscored"):
        if counts.get(reason):
            report.records(reason, counts[reason])
    report.gauge("flywheel_train_pairs", float(counts.get("pairs", 0)))


def report_training(report: StageReport, *, outcome: TrainOutcome, lineage: Lineage) -> None:
    """The training's metrics (loss, reward margin, entropy, ...), golden accuracy of the base
    and the candidate, and the run count, by method."""
    m, ev = outcome.metrics, lineage.evaluation
    method = outcome.method
    gauges = {
        "flywheel_train_loss": m.get("loss"),
        "flywheel_train_reward_margin": m.get("rewards/margins"),
        "flywheel_train_preference_accuracy": m.get("rewards/accuracies"),
        "flywheel_train_seconds_per_step": m.get("seconds_per_step"),
        "flywheel_train_steps": m.get("steps"),
        "flywheel_train_entropy": m.get("entropy"),  # the design's mode-collapse check
    }
    for name, value in gauges.items():
        if value is not None:
            report.gauge(name, float(value), method=method)
    report.gauge("flywheel_train_golden_accuracy", ev.base_accuracy, model="base")
    report.gauge("flywheel_train_golden_accuracy", ev.accuracy, model="candidate")
    report.count("flywheel_train_runs_total", 1, method=method)


def skip_markdown(result: TrainRunResult) -> str:
    """The artifact of a skipped run: why, and the selection's counts."""
    lines = [f"# train: {result.message}", "", "| selection | rows |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(result.counts.items())]
    return "\n".join(lines)


def publish_train(result: TrainRunResult, run_id: str) -> None:
    """The run's ``train-summary`` artifact (the model card, or why it skipped) and its log
    line."""
    create_markdown_artifact(
        key="train-summary",
        markdown=card_markdown(result.lineage) if result.lineage else skip_markdown(result),
        description=f"train {result.version or 'skipped'}",
    )
    get_run_logger().info("train %s: %s", run_id, result.message)
