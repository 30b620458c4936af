"""An erasure's replacement of a serving student (:mod:`flows.erasure`): the student is
distilled again, with its own profile and hyperparameters, from ``plan.base`` (its teacher, or
the newest version on its chain that no erased user reached: a teacher that saw the user would
pass the user on through its logits) on the accepted rows of the chain's training sets minus
the erased ones."""

from __future__ import annotations

import uuid
from dataclasses import fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.runtime import Runtime
    from tasks.governance.replacement import ReplacementPlan


def redistil(rt: Runtime, plan: ReplacementPlan, *, max_steps: int | None) -> str | None:
    """Distil and publish the replacement of ``plan.serving`` (a student); its version, or
    None when none of the rows left is an accepted answer."""
    from infra.catalog import current_snapshot_id
    from infra.serving.models import fetch_model, model_cache_root
    from infra.settings import StudentProfile
    from tasks.datasets import training_exclusions
    from tasks.distil.publish import distil_and_publish
    from tasks.distil.run import DistilPlan, accepted
    from tasks.distil.trainer import DistilConfig
    from tasks.train.pairs import GoldenFilter, prompt_renderer, select

    s, recipe = rt.settings, plan.recipe
    student = recipe.student or {}
    teacher_dir = fetch_model(rt.store, plan.base, model_cache_root(s))
    kept, drops = accepted(plan.rows, s)
    selection = select(
        kept,
        min_margin=0.0,
        contaminated=GoldenFilter.from_settings(s.reward, recipe.workload, workloads=s.workloads),
        opted_out=training_exclusions(rt.catalog, mode=s.consent_mode),
        render=prompt_renderer(teacher_dir),
        snapshot_id=current_snapshot_id(rt.catalog, "training_examples"),
        windows=sorted({r["window"] for r in plan.rows}),
    )
    if not selection.sft:
        return None
    selection.workload = recipe.workload
    selection.counts = {**selection.counts, **drops, "read": len(plan.rows), "accepted": len(kept)}
    known = {f.name for f in fields(DistilConfig)}
    config = DistilConfig(**{k: v for k, v in recipe.hyperparameters.items() if k in known})
    if max_steps:
        config = DistilConfig(**{**vars(config), "steps": max_steps})
    distil_plan = DistilPlan(
        run_id=str(uuid.uuid4()),
        workload=recipe.workload,
        teacher=plan.base,
        teacher_dir=teacher_dir,
        profile_name=str(student.get("profile", "erasure-replacement")),
        profile=StudentProfile(**student["shape"]),
        selection=selection,
        started=datetime.now(UTC),
    )
    with rt.reporting("distil"):
        result = distil_and_publish(rt, distil_plan, config=config)
    return result.version
