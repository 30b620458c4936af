"""Erasure reaching the models: ``erasure-replacement`` (run by the weekly flow while an
erasure is open); the case a forget-user opens is
:func:`tasks.governance.erasure_steps.open_case`, a person's choice when a replacement failed
is ``erasure-resolve`` (:mod:`flows.erasure_resolve`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from prefect import flow

from flows.release import ReleaseOptions, release
from infra.flow_docs import described
from infra.parameters import Steps
from infra.routing import RoutingBackend, RoutingState, open_routing, scoped
from infra.runtime import Runtime
from infra.traces.conversation import DEFAULT_WORKLOAD
from tasks.distil.replace import redistil
from tasks.governance.erasure_steps import (
    ACTOR,
    ReplacementResult,
    fail_cases,
    record_step,
    retire_cases,
)
from tasks.governance.reach import ErasureCase, open_cases, publish_gauges
from tasks.governance.replacement import (
    IN_PROGRESS,
    ReplacementPlan,
    lines_reached,
    mark_replacement,
    plan_replacement,
    reached,
    routed_versions,
)
from tasks.release import controls


@described
@flow(name="erasure-replacement", log_prints=False)
def replace_erased(max_steps: Steps | None = None) -> ReplacementResult:
    """Replace every model version that trained on a forgotten user's data, before the
    deadline (FLYWHEEL_ERASURE__DEADLINE_DAYS after forget-user). All open erasures are
    batched: on each release line whose stable version saw an erased user (the shared line,
    or a workload's own), that version's recipe is trained again on its reproducible training
    set (its workload's rows, from its base) minus the erased rows, gated and released on
    that line like any candidate, as a run named release-erasure-<workload>-<version>; once
    every replacement is promoted, every version that saw an erased user and no line serves
    is retired (never routed or released again); other workloads' lines are left alone. A
    replacement that fails the gate changes nothing more: the alert fires and a person
    chooses (`flywheel erasure-resolve RECEIPT --rollback|--accept`).

    Args:
        max_steps: Stop training after this many optimizer steps. Empty: the recipe's.
    """
    rt = Runtime.from_env()
    routing = open_routing(rt.settings, rt.store, catalog=rt.catalog)
    cases = open_cases(rt.store)
    try:
        if not any(c.status == "pending" for c in cases):
            return ReplacementResult(status="none", message="no erasure waits for a replacement")
        return _replace(rt, routing, cases, max_steps)
    finally:
        publish_gauges(rt)


def _replace(
    rt: Runtime, routing: RoutingBackend, cases: list[ErasureCase], max_steps: int | None
) -> ReplacementResult:
    """Abort the releases whose candidate (or whose line's stable version) saw an erased
    user, replace each reached line's stable version (the shared one, a workload's own) on
    that line, then retire every reached version no line serves any more."""
    receipts = [c.receipt for c in cases]
    state = routing.load()
    affected = reached(cases)
    lines = lines_reached(state, affected)
    for workload, view in lines.items():
        _abort_release(rt, scoped(routing, workload), view, cases)
    replaced: dict[str, str] = {}
    for workload, view in lines.items():
        if view.stable not in affected:
            continue
        version, failure = _replace_line(rt, cases, workload, view.stable, max_steps)
        if failure is not None:
            return failure
        replaced[_line_name(workload)] = version
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


def _line_name(workload: str | None) -> str:
    return workload or DEFAULT_WORKLOAD


def _replace_line(
    rt: Runtime, cases: list[ErasureCase], workload: str | None, stable: str, max_steps: int | None
) -> tuple[str, ReplacementResult | None]:
    """Train ``stable``'s replacement (its recipe: its workload's rows, from its base) and
    release it on ``workload``'s line: (the version, None) once promoted, else the failure."""
    receipts = [c.receipt for c in cases]
    line = _line_name(workload)
    plan = plan_replacement(rt.store, rt.catalog, serving=stable, cases=cases)
    record_step(rt, cases, "replacement planned", plan.serving, f"{line}: {_plan_text(plan)}")
    student = plan.recipe.method == "distil"  # a student is distilled again, not trained
    version = redistil(rt, plan, max_steps=max_steps) if student else _train(rt, plan, max_steps)
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


def _train(rt: Runtime, plan: ReplacementPlan, max_steps: int | None) -> str | None:
    """Train and publish the replacement; None when nothing is left to train on."""
    from infra.catalog import current_snapshot_id
    from infra.models import model_cache_root
    from tasks.datasets import training_exclusions
    from tasks.train.checkpoints import fetch_base_task
    from tasks.train.config import TrainConfig
    from tasks.train.methods import Data, MethodChoice
    from tasks.train.pairs import GoldenFilter, prompt_renderer, select
    from tasks.train.run import TrainRun, train_selection

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
    items: Data = {"dpo": selection.pairs, "rft": selection.sft, "grpo": selection.prompts}
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


def _abort_release(
    rt: Runtime, routing: RoutingBackend, state: RoutingState, cases: list[ErasureCase]
) -> None:
    """A release in progress on this line (``routing``, ``state``: the line's) ends when its
    candidate saw an erased user (it is retired with the others) or when a replacement must
    be released on it (the erasure's deadline comes first; the candidate is rejected)."""
    if state.candidate is None or state.phase not in IN_PROGRESS:
        return
    controls.abort(routing, rt.catalog, actor=ACTOR, reason="an erasure replacement comes first")
    record_step(rt, cases, "release aborted", state.candidate, "an erasure replacement comes first")


def _plan_text(plan: ReplacementPlan) -> str:
    return (
        f"{plan.recipe.method} recipe of {plan.serving} from {plan.base} on the training sets "
        f"of {', '.join(plan.chain)}: {len(plan.rows)} rows, {plan.erased} erased rows left out"
    )
