"""What a training run trains on and how: the one selection used by the ``train`` flow and by
the GPU recipe (``python -m deployments.train_recipe select``), so that both train on the same
rows.

The settings decide every knob of the selection (buffer windows and days, per-workload days,
margin, golden decontamination, human overrides, on-policy, consent mode) and of the method choice (minimum data, the
ablation's regressed methods); a caller passes only the catalog, the base model, an
optional method and an optional workload (``flywheel train --workload W``: W's rows only,
decontaminated against W's golden set too)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from prefect import task

from infra.settings.workloads import configured_workload
from infra.task_retries import IO_RETRIES
from tasks.train.buffer import BufferScope
from tasks.train.evidence import ABLATION_FILE, regressed_methods
from tasks.train.methods import MethodChoice, choose_method
from tasks.train.pairs import GoldenFilter, Selection, prompt_renderer, select_training_data

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.settings import Settings


@dataclass(frozen=True)
class TrainingPlan:
    """The rows a run trains on (``selection``) and the method picked for them (``choice``)."""

    selection: Selection
    choice: MethodChoice


def plan_training(
    catalog: Catalog,
    *,
    settings: Settings,
    base_version: str,
    base_dir: Path,
    method: str | None = None,
    workload: str | None = None,
) -> TrainingPlan:
    """Select the rolling buffer at one snapshot, as ``settings`` configure it, rendered with
    the base model's prompt template, and choose the method (``method`` or the settings');
    ``workload``: that workload's rows only (None: every workload's).

    Raises:
        UnknownWorkload: ``workload`` is not configured (``FLYWHEEL_WORKLOADS``).
    """
    cfg, workloads = settings.train, settings.workloads
    configured_workload(workload, workloads)
    scope = BufferScope(
        buffer_windows=cfg.buffer_windows,
        buffer_days=cfg.buffer_days,
        workload_days=cfg.workload_buffer_days,
        served_by=base_version if cfg.on_policy else None,
        workload=workload,
        workloads=workloads,
    )
    selection = select_training_data(
        catalog,
        scope=scope,
        min_margin=cfg.min_margin,
        render=prompt_renderer(base_dir),
        contaminated=GoldenFilter.from_settings(settings.reward, workload, workloads=workloads),
        human_override=settings.review.override_rewards,
        consent_mode=settings.consent_mode,
    )
    choice = choose_method(
        method or cfg.method,
        pairs=len(selection.pairs),
        singles=len(selection.sft),
        prompts=len(selection.prompts),
        min_pairs=cfg.min_pairs,
        regressed=regressed_methods(
            cfg.ablation_path or settings.home_dir / "prove" / ABLATION_FILE,
            pairs=len(selection.pairs),
            sft_weight=cfg.sft_weight,
        ),
    )
    return TrainingPlan(selection=selection, choice=choice)


@task(**IO_RETRIES)
def plan_training_task(
    catalog: Catalog,
    *,
    settings: Settings,
    base_version: str,
    base_dir: Path,
    method: str | None = None,
    workload: str | None = None,
) -> TrainingPlan:
    """Returns the training plan: the selected rows and the method (as plan_training)."""
    return plan_training(
        catalog,
        settings=settings,
        base_version=base_version,
        base_dir=base_dir,
        method=method,
        workload=workload,
    )


@dataclass(kw_only=True)
class TrainRun:
    """What one train run trains: its id (``train_run``: links pairs and lineage to it), the
    base version and its local directory, the rows selected and the method chosen for them,
    and when it started."""

    run_id: str
    base: str
    base_dir: Path
    choice: MethodChoice
    selection: Selection
    started: datetime
