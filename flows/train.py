"""Stage 4 flow: ``train``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast
from uuid import UUID

from prefect import flow, get_run_logger
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    update_progress_artifact,
)
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from infra.audit import record_event
from infra.catalog import current_snapshot_id
from infra.metrics import StageReport
from infra.models import model_cache_root
from infra.parameters import ModelVersion, Steps, TrainMethod, Workload
from infra.runtime import Runtime
from infra.settings.workloads import configured_workload
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
from tasks.train.methods import MethodChoice
from tasks.train.pairs import Selection, write_pairs_task
from tasks.train.plan import plan_training_task
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


@flow(name="train", log_prints=False)
def train(
    method: TrainMethod | None = None,
    max_steps: Steps | None = None,
    base_version: ModelVersion | None = None,
    workload: Workload | None = None,
) -> TrainRunResult:
    """Preference-tune the serving model on curated traffic and publish a candidate version.

    Builds preference pairs from the last windows of flywheel.training_examples (best vs worst
    answer of each prompt, golden questions excluded), trains with DPO (or RFT / GRPO; "auto"
    picks by data size and says why), and publishes models/<next version>/ with a model card
    and lineage (data snapshots, reward config, PII settings, metrics, golden accuracy). With
    too few pairs the run ends "skipped" with the count. Leave the fields empty for the
    settings' defaults; base version defaults to the stable one. With a workload (one
    FLYWHEEL_WORKLOADS lists), only its rows are read (default: those recorded under no
    workload, "default" or one that is not configured), the
    base is that workload's stable version (its own once it promoted one, else the shared
    stable), the golden evaluation uses its golden set, and the lineage names it.

    Args:
        method: dpo, rft or grpo, or auto to pick by data size (the run says why). Empty:
            FLYWHEEL_TRAIN__METHOD.
        max_steps: Stop training after this many optimizer steps. Empty:
            FLYWHEEL_TRAIN__MAX_STEPS.
        base_version: The model version to tune, e.g. v2. Empty: the stable version.
        workload: Train on this workload's rows only, e.g. support. Empty: every workload.
    """
    logger = get_run_logger()
    rt = Runtime.from_env()
    configured_workload(workload, rt.settings.workloads)  # before anything is read or written
    cfg = rt.settings.train
    run_id = str(flow_run.id or uuid.uuid4())  # train_run: links pairs and lineage to this run
    started = datetime.now(UTC)
    with rt.reporting("train") as report:
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
        selection, choice = plan.selection, plan.choice
        _report_selection(report, selection)
        if choice.method is None:
            result = _skipped(rt, run_id=run_id, base=base, choice=choice, selection=selection)
        else:
            config = TrainConfig.from_settings(
                cfg, method=choice.method, max_steps=max_steps, demo_base=is_demo_model(base_dir)
            )
            result = train_selection(
                rt,
                report,
                run_id=run_id,
                base=base,
                base_dir=base_dir,
                choice=choice,
                selection=selection,
                config=config,
                started=started,
            )
    create_markdown_artifact(
        key="train-summary",
        markdown=card_markdown(result.lineage) if result.lineage else _skip_markdown(result),
        description=f"train {result.version or 'skipped'}",
    )
    logger.info("train %s: %s", run_id, result.message)
    return result


def train_selection(
    rt: Runtime,
    report: StageReport,
    *,
    run_id: str,
    base: str,
    base_dir: Path,
    choice: MethodChoice,
    selection: Selection,
    config: TrainConfig,
    started: datetime,
) -> TrainRunResult:
    """Train ``config`` on ``selection`` from ``base`` and publish the next version with its
    lineage (the ``train`` flow, and the erasure replacement on its own selection)."""
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
    data = {"pairs": selection.pairs, "sft": selection.sft, "prompts": selection.prompts}
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
            base_version=base,
            train_run=run_id,
            choice=choice,
            config=config,
            selection=selection,
            pairs_snapshot_id=pairs_sid,
            consent_snapshot_id=consent_sid,
            outcome=outcome,
            evaluation=evaluation,
            settings=rt.settings,
            started_at=started,
        )
        lineage = publish_task(rt.store, outcome.output_dir, lineage=lineage)
    _report_training(report, outcome=outcome, lineage=lineage)
    return _trained(rt, choice=choice, selection=selection, outcome=outcome, lineage=lineage)


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


def _skipped(
    rt: Runtime, *, run_id: str, base: str, choice: MethodChoice, selection: Selection
) -> TrainRunResult:
    record_event(
        rt.catalog,
        event_type="train_skipped",
        actor="train",
        subject=run_id,
        details={
            "reason": choice.reason,
            "counts": selection.counts,
            "base_version": base,
            **_workload(selection),
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


def _workload(selection: Selection) -> dict[str, str]:
    """The audit details naming the run's workload (none for a run over every workload)."""
    return {"workload": selection.workload} if selection.workload else {}


def _trained(
    rt: Runtime,
    *,
    choice: MethodChoice,
    selection: Selection,
    outcome: TrainOutcome,
    lineage: Lineage,
) -> TrainRunResult:
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
            **_workload(selection),
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


def _report_selection(report: StageReport, selection: Selection) -> None:
    counts = selection.counts
    report.records("in", counts.get("read", 0))
    report.records("out", counts.get("pairs", 0))
    for reason in ("decontaminated", "dropped_opted_out", "dropped_unscored"):
        if counts.get(reason):
            report.records(reason, counts[reason])
    report.gauge("flywheel_train_pairs", float(counts.get("pairs", 0)))


def _report_training(report: StageReport, *, outcome: TrainOutcome, lineage: Lineage) -> None:
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


def _skip_markdown(result: TrainRunResult) -> str:
    lines = [f"# train: {result.message}", "", "| selection | rows |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(result.counts.items())]
    return "\n".join(lines)
