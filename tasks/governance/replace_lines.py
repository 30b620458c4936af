"""Replacing the model versions an erasure reached (the ``erasure-replacement`` flow,
flows/erasure.py): releases in progress on a reached line aborted, each reached line's stable
version trained again on its recipe without the erased rows and released on that line, then
every reached version no line serves retired."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from infra.routing import RoutingBackend, RoutingState, scoped
from infra.runtime import Runtime
from infra.traces.conversation import DEFAULT_WORKLOAD
from tasks.governance.erasure_steps import (
    ACTOR,
    ReplacementResult,
    fail_cases,
    record_step,
    retire_cases,
)
from tasks.governance.reach import ErasureCase
from tasks.governance.replacement import (
    IN_PROGRESS,
    ReplacementPlan,
    lines_reached,
    mark_replacement,
    plan_replacement,
    reached,
    routed_versions,
)
from tasks.release.machine import controls
from tasks.release.options import ReleaseOptions

if TYPE_CHECKING:
    from prefect import Flow

    from tasks.release.machine.outcome import ReleaseOutcome


def replace_reached(
    rt: Runtime,
    routing: RoutingBackend,
    cases: list[ErasureCase],
    max_steps: int | None,
    *,
    release: Flow[..., ReleaseOutcome],
    redistil: Callable[..., str | None],
) -> ReplacementResult:
    """Abort the releases whose candidate (or whose line's stable version) saw an erased
    user, replace each reached line's stable version (the shared one, a workload's own) on
    that line, then retire every reached version no line serves any more. ``release`` is the
    release flow (each replacement's release a subflow run), ``redistil`` distils a student's
    replacement (:func:`tasks.distil.replace.redistil`)."""
    receipts = [c.receipt for c in cases]
    state = routing.load()
    affected = reached(cases)
    lines = lines_reached(state, affected)
    for workload, view in lines.items():
        abort_release(rt, scoped(routing, workload), view, cases)
    replaced: dict[str, str] = {}
    for workload, view in lines.items():
        if view.stable not in affected:
            continue
        version, failure = replace_line(
            rt, cases, workload, view.stable, max_steps, release=release, redistil=redistil
        )
        if failure is not None:
            return failure
        replaced[line_name(workload)] = version
    serving = routing.load()
    retire = affected - routed_versions(serving)
    how = "replaced" if replaced else "not serving"
    retire_cases(rt, routing, cases, retire, serving=serving.stable, how=how)
    if not replaced:
        return ReplacementResult(
            status="retired",
            message="no serving version saw an erased user",
            receipts=receipts,
            retired=sorted(retire),
        )
    return ReplacementResult(
        status="promoted",
        message="; ".join(f"{line}: {v}" for line, v in replaced.items())
        + f" replace {', '.join(sorted(retire))}",
        receipts=receipts,
        version=replaced.get(DEFAULT_WORKLOAD) or next(iter(replaced.values())),
        retired=sorted(retire),
        outcome="promoted",
        replacements=replaced,
    )


def line_name(workload: str | None) -> str:
    """The release line's name in reports: the workload, else the shared line's."""
    return workload or DEFAULT_WORKLOAD


def replace_line(
    rt: Runtime,
    cases: list[ErasureCase],
    workload: str | None,
    stable: str,
    max_steps: int | None,
    *,
    release: Flow[..., ReleaseOutcome],
    redistil: Callable[..., str | None],
) -> tuple[str, ReplacementResult | None]:
    """Train ``stable``'s replacement (its recipe: its workload's rows, from its base) and
    release it on ``workload``'s line: (the version, None) once promoted, else the failure."""
    receipts = [c.receipt for c in cases]
    line = line_name(workload)
    plan = plan_replacement(rt.store, rt.catalog, serving=stable, cases=cases)
    record_step(rt, cases, "replacement planned", plan.serving, f"{line}: {plan_text(plan)}")
    student = plan.recipe.method == "distil"  # a student is distilled again, not trained
    version = (
        redistil(rt, plan, max_steps=max_steps)
        if student
        else train_replacement(rt, plan, max_steps)
    )
    if version is None:
        why = "no training data left without the erased rows"
        return "", fail_cases(rt, cases, None, why, line=line)
    mark_replacement(rt.store, plan, version, receipts)
    for case in cases:
        if workload is None or case.replacement is None:
            case.replacement = version
    detail = f"{line}: recipe of {plan.serving}, from {plan.base}"
    record_step(rt, cases, "replacement trained", version, detail)
    run = release.with_options(flow_run_name=f"release-erasure-{line}-{version}")
    # a student's replacement need not beat it, only be no worse (it is no cheaper: same shape)
    options = ReleaseOptions(actor=ACTOR, workload=workload, non_inferior=student, cheaper=False)
    out = run(version, options)
    if out.outcome != "promoted":
        why = f"{line}: release {out.outcome}: {'; '.join(out.reasons) or out.outcome}"
        return version, fail_cases(rt, cases, version, why, line=line, outcome=out.outcome)
    record_step(rt, cases, "replacement promoted", version, f"serves the {line} traffic")
    return version, None


def train_replacement(rt: Runtime, plan: ReplacementPlan, max_steps: int | None) -> str | None:
    """Train and publish the replacement; None when nothing is left to train on."""
    from infra.catalog import current_snapshot_id
    from infra.serving.models import model_cache_root
    from tasks.datasets import training_exclusions
    from tasks.train.checkpoints import fetch_base_task
    from tasks.train.config import TrainConfig
    from tasks.train.methods import MethodChoice
    from tasks.train.pairs import GoldenFilter, prompt_renderer, select
    from tasks.train.plan import TrainRun
    from tasks.train.run import train_selection

    cfg, recipe = rt.settings.train, plan.recipe
    base_dir = fetch_base_task(rt.store, plan.base, cache_root=model_cache_root(rt.settings))
    selection = select(
        plan.rows,
        min_margin=cfg.min_margin,
        contaminated=GoldenFilter.from_settings(
            rt.settings.reward, recipe.workload, workloads=rt.settings.workloads
        ),
        opted_out=training_exclusions(rt.catalog, mode=rt.settings.consent_mode),
        render=prompt_renderer(base_dir),
        snapshot_id=current_snapshot_id(rt.catalog, "training_examples"),
        windows=sorted({r["window"] for r in plan.rows}),
    )
    selection.workload = recipe.workload  # a workload's adapter is replaced by one for it
    items: dict[str, Sequence[object]] = {
        "dpo": selection.pairs,
        "rft": selection.sft,
        "grpo": selection.prompts,
    }
    method = recipe.method
    if not items.get(method):
        return None
    hyper = {**recipe.hyperparameters, "method": method}
    if max_steps:
        hyper["max_steps"] = max_steps
    config = TrainConfig(**hyper, lora_output=cfg.lora_output, max_shard_size=cfg.max_shard_size)
    reason = f"erasure replacement: the recipe of {plan.serving} without the erased rows"
    choice = MethodChoice(method=config.method, reason=reason, available=len(items[method]))
    run = TrainRun(
        run_id=str(uuid.uuid4()),
        base=plan.base,
        base_dir=base_dir,
        choice=choice,
        selection=selection,
        started=datetime.now(UTC),
    )
    with rt.reporting("train") as report:
        result = train_selection(rt, report, run, config)
    return result.version


def abort_release(
    rt: Runtime, routing: RoutingBackend, state: RoutingState, cases: list[ErasureCase]
) -> None:
    """A release in progress on this line (``routing``, ``state``: the line's) ends when its
    candidate saw an erased user (it is retired with the others) or when a replacement must
    be released on it (the erasure's deadline comes first; the candidate is rejected)."""
    if state.candidate is None or state.phase not in IN_PROGRESS:
        return
    controls.abort(routing, rt.catalog, actor=ACTOR, reason="an erasure replacement comes first")
    record_step(rt, cases, "release aborted", state.candidate, "an erasure replacement comes first")


def plan_text(plan: ReplacementPlan) -> str:
    """The replacement plan in one line: recipe, base, training sets and rows."""
    return (
        f"{plan.recipe.method} recipe of {plan.serving} from {plan.base} on the training sets "
        f"of {', '.join(plan.chain)}: {len(plan.rows)} rows, {plan.erased} erased rows left out"
    )
