"""One ``distil`` run (:mod:`flows.distil`): the workload's accepted traffic selected at one
snapshot, a student of the profile trained on it against the teacher (the workload's stable
version), evaluated on the workload's golden set beside the teacher, and published as the next
model version with its lineage and model card.

Accepted traffic: rows of ``training_examples`` for the workload in the rolling buffer (the
train settings' days and windows), eligible to train on, with a reward of at least
``distil.min_reward`` and a judge verdict (the workload's verifier) of at least
``distil.min_judge``; consent, golden decontamination and human review apply as for any
training. One answer per conversation (the best), rendered exactly as served."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from infra.errors import ConfigError
from tasks.train.lineage import Evaluation, Lineage, Privacy, training_data

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.runtime import Runtime
    from infra.settings import Settings, StudentProfile
    from tasks.datasets import BufferedExample
    from tasks.distil.trainer import DistilConfig, DistilOutcome
    from tasks.train.pairs import Selection


@dataclass(kw_only=True)
class DistilPlan:
    """What one distil run trains: the teacher, the student profile, the accepted rows."""

    run_id: str
    workload: str | None
    teacher: str
    teacher_dir: Path
    profile_name: str
    profile: StudentProfile
    selection: Selection
    started: datetime


@dataclass(kw_only=True)
class DistilResult:
    """What one distil run did: "trained" (``version`` the student) or "skipped" (why)."""

    status: Literal["trained", "skipped"]
    message: str
    workload: str | None
    teacher: str
    student_profile: str
    examples: int
    counts: dict[str, int] = field(default_factory=dict)
    version: str | None = None
    teacher_accuracy: float | None = None
    student_accuracy: float | None = None
    teacher_parameters: int | None = None
    student_parameters: int | None = None
    lineage: Lineage | None = None


def accepted(
    rows: Sequence[BufferedExample], settings: Settings
) -> tuple[list[BufferedExample], Counter[str]]:
    """The rows distillation learns from (see the module docstring) and the drops, counted."""
    cfg = settings.distil
    counts: Counter[str] = Counter()
    out: list[BufferedExample] = []
    for row in rows:
        judge = row.get("reward_judge")
        if row.get("eligible_as") != "train":
            counts["dropped_not_eligible"] += 1
        elif row.get("reward") is None or float(row["reward"]) < cfg.min_reward:
            counts["dropped_low_reward"] += 1
        elif judge is None or float(judge) < cfg.min_judge:
            counts["dropped_not_verified"] += 1
        else:
            out.append(row)
    return out, counts


def student_profile(settings: Settings, asked: str | None) -> tuple[str, StudentProfile]:
    """(name, profile) of the student to train: ``asked``, else the settings' default.

    Raises:
        ConfigError: no student profile of that name is configured.
    """
    name = settings.distil.profile_name(settings.profile, asked)
    profile = settings.distil.students.get(name)
    if profile is None:
        known = ", ".join(sorted(settings.distil.students)) or "none"
        raise ConfigError(f"no student profile {name!r} (FLYWHEEL_DISTIL__STUDENTS has {known})")
    return name, profile


def plan_distil(rt: Runtime, *, workload: str | None, student: str | None) -> DistilPlan:
    """The run's teacher (the workload's stable version, fetched), student profile and
    accepted rows, rendered with the teacher's prompt template."""
    from infra.serving.models import fetch_model, model_cache_root
    from tasks.datasets import training_exclusions
    from tasks.review import override_rewards
    from tasks.train.buffer import read_examples
    from tasks.train.checkpoints import pick_base_version
    from tasks.train.pairs import GoldenFilter, prompt_renderer, select

    s = rt.settings
    name, profile = student_profile(s, student)
    teacher = pick_base_version(rt.store, workload)
    teacher_dir = fetch_model(rt.store, teacher, model_cache_root(s))
    rows, sid, windows = read_examples(
        rt.catalog,
        s.train.buffer_windows,
        buffer_days=s.train.buffer_days,
        workload_days=s.train.workload_buffer_days,
        workload=workload,
        workloads=s.workloads,
    )
    if s.review.override_rewards:
        override_rewards(rt.catalog, rows)
    kept, drops = accepted(rows, s)
    selection = select(
        kept,
        min_margin=0.0,
        contaminated=GoldenFilter.from_settings(s.reward, workload, workloads=s.workloads),
        opted_out=training_exclusions(rt.catalog, mode=s.consent_mode),
        render=prompt_renderer(teacher_dir),
        snapshot_id=sid,
        windows=windows,
    )
    selection.workload = workload
    selection.counts = {**selection.counts, **drops, "read": len(rows), "accepted": len(kept)}
    return DistilPlan(
        run_id=str(uuid.uuid4()),
        workload=workload,
        teacher=teacher,
        teacher_dir=teacher_dir,
        profile_name=name,
        profile=profile,
        selection=selection,
        started=datetime.now(UTC),
    )


def skipped(plan: DistilPlan, why: str) -> DistilResult:
    """The result of a run that trains nothing."""
    return DistilResult(
        status="skipped",
        message=why,
        workload=plan.workload,
        teacher=plan.teacher,
        student_profile=plan.profile_name,
        examples=len(plan.selection.sft),
        counts=plan.selection.counts,
    )


def train_student(rt: Runtime, plan: DistilPlan, config: DistilConfig, work: Path) -> DistilOutcome:
    """The student trained on the plan's rows against the teacher, saved under ``work``."""
    from transformers import AutoTokenizer

    from infra.serving.causal_lm import load_causal_lm, placement
    from tasks.distil.trainer import distil_model

    where = placement(rt.settings.device)
    teacher = load_causal_lm(plan.teacher_dir, where=where)
    tok = AutoTokenizer.from_pretrained(str(plan.teacher_dir), local_files_only=True)
    return distil_model(
        teacher,
        tok,
        work / "student",
        examples=plan.selection.sft,
        profile=plan.profile,
        config=config,
        device=where.device,
    )


def student_lineage(
    rt: Runtime,
    plan: DistilPlan,
    *,
    config: DistilConfig,
    outcome: DistilOutcome,
    evaluation: Evaluation,
    consent_snapshot_id: int | None,
) -> Lineage:
    """The student's lineage: the teacher as its base version, the rows and salted user keys
    it learned from (so erasure and ``flywheel lineage`` reach it), its profile and size."""
    # the accepted answers, one per conversation, as an rft run reads its rows
    data = training_data(plan.selection, "rft", preference_pairs=None, pairs=0)
    privacy = Privacy.of(rt.settings.curate, consent_snapshot_id)
    how = "SFT + KL to the teacher's logits" if outcome.token_level else "SFT (own vocabulary)"
    ratio = outcome.student_parameters / max(1, outcome.teacher_parameters)
    return Lineage(
        version=None,
        base_version=plan.teacher,
        train_run=plan.run_id,
        method="distil",
        method_reason=f"student {plan.profile_name} of {plan.teacher}: {how}",
        hyperparameters=config.hyperparameters(),
        data=data,
        privacy=privacy,
        metrics=outcome.metrics,
        evaluation=evaluation,
        hardware=outcome.hardware,
        wall_s=round(outcome.wall_s, 1),
        started_at=plan.started,
        finished_at=datetime.now(UTC),
        workload=plan.workload,
        student={
            "profile": plan.profile_name,
            "shape": plan.profile.model_dump(),
            "parameters": outcome.student_parameters,
            "teacher_parameters": outcome.teacher_parameters,
            "parameter_ratio": round(ratio, 4),
            "token_level_distillation": outcome.token_level,
        },
    )


def trained(plan: DistilPlan, lineage: Lineage, outcome: DistilOutcome) -> DistilResult:
    """The result of a run that published a student."""
    ev = lineage.evaluation
    return DistilResult(
        status="trained",
        message=(
            f"distilled {lineage.version} ({plan.profile_name}, "
            f"{outcome.student_parameters:,} parameters) from {plan.teacher} "
            f"({outcome.teacher_parameters:,}): golden accuracy {ev.base_accuracy:.3f} "
            f"(teacher) vs {ev.accuracy:.3f} (student)"
        ),
        workload=plan.workload,
        teacher=plan.teacher,
        student_profile=plan.profile_name,
        examples=len(plan.selection.sft),
        counts=plan.selection.counts,
        version=lineage.version,
        teacher_accuracy=ev.base_accuracy,
        student_accuracy=ev.accuracy,
        teacher_parameters=outcome.teacher_parameters,
        student_parameters=outcome.student_parameters,
        lineage=lineage,
    )
