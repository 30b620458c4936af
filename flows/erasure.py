"""Erasure reaching the models: ``erasure-replacement`` (run by the weekly flow while an
erasure is open) and ``erasure-resolve`` (a person's choice when a replacement failed)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from prefect import flow, get_run_logger

from flows.parameters import Receipt, Steps
from flows.release import ReleaseOptions, release
from flows.release_server import unload_unrouted
from flows.train import train_selection
from infra.audit import record_event
from infra.errors import ControlRefused, TransientError
from infra.model_server import open_model_server
from infra.models import ServableVersions
from infra.routing import RoutingBackend, RoutingState, load_state, open_routing
from infra.runtime import Runtime
from tasks.governance.erasure import Erasure
from tasks.governance.reach import (
    ErasureCase,
    load_case,
    new_case,
    open_cases,
    publish_gauges,
    save_case,
)
from tasks.governance.replacement import (
    ReplacementPlan,
    mark_replacement,
    mark_retired,
    plan_replacement,
    reached,
    retire_versions,
    rollback_target,
)
from tasks.release import controls

ACTOR = "erasure-replacement"


@dataclass(kw_only=True)
class ReplacementResult:
    """What one replacement run did: ``status`` none (no open erasure), retired (nothing that
    serves saw the user: the reached versions were retired at once), promoted (the replacement
    serves, the reached versions are retired) or failed (a person must choose)."""

    status: Literal["none", "retired", "promoted", "failed"]
    message: str
    receipts: list[str] = field(default_factory=list)
    version: str | None = None
    retired: list[str] = field(default_factory=list)
    outcome: str | None = None  # the replacement's release outcome


@flow(name="erasure-replacement", log_prints=False)
def replace_erased(max_steps: Steps | None = None) -> ReplacementResult:
    """Replace every model version that trained on a forgotten user's data, before the
    deadline (FLYWHEEL_ERASURE__DEADLINE_DAYS after forget-user). All open erasures are
    batched: the stable version's recipe is trained again on its reproducible training set
    minus the erased rows, gated and released like any candidate; once it is promoted, every
    version that saw an erased user is retired (never routed or released again). A
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
    receipts = [c.receipt for c in cases]
    state = routing.load()
    affected = reached(cases)
    if state.candidate in affected or state.stable in affected:
        _abort_release(rt, routing, state, cases)
    if state.stable not in affected:  # nothing that serves saw the user: retire at once
        _retire(rt, routing, cases, affected, serving=state.stable, how="not serving")
        return ReplacementResult(
            status="retired",
            message="no serving version saw an erased user",
            receipts=receipts,
            retired=sorted(affected),
        )
    plan = plan_replacement(rt.store, rt.catalog, serving=state.stable, cases=cases)
    _step(rt, cases, "replacement planned", plan.serving, _plan_text(plan))
    version = _train(rt, plan, cases, max_steps)
    if version is None:
        return _failed(rt, cases, None, "no training data left without the erased rows")
    mark_replacement(rt.store, plan, version, receipts)
    for case in cases:
        case.replacement = version
    _step(rt, cases, "replacement trained", version, f"recipe of {plan.serving}, from {plan.base}")
    out = release(version, ReleaseOptions(actor=ACTOR))
    if out.outcome != "promoted":
        why = "; ".join(out.reasons) or out.outcome
        return _failed(rt, cases, version, f"release {out.outcome}: {why}", outcome=out.outcome)
    _step(rt, cases, "replacement promoted", version, "serves all traffic")
    _retire(rt, routing, cases, affected - {version}, serving=version, how="replaced")
    return ReplacementResult(
        status="promoted",
        message=f"{version} replaces {', '.join(sorted(affected))}",
        receipts=receipts,
        version=version,
        retired=sorted(affected - {version}),
        outcome=out.outcome,
    )


def _train(
    rt: Runtime, plan: ReplacementPlan, cases: list[ErasureCase], max_steps: int | None
) -> str | None:
    """Train and publish the replacement; None when nothing is left to train on."""
    from infra.catalog import current_snapshot_id
    from infra.models import model_cache_root
    from tasks.datasets import training_exclusions
    from tasks.train.checkpoints import fetch_base_task
    from tasks.train.config import TrainConfig
    from tasks.train.methods import MethodChoice
    from tasks.train.pairs import GoldenFilter, prompt_renderer, select

    cfg, recipe = rt.settings.train, plan.recipe
    base_dir = fetch_base_task(rt.store, plan.base, cache_root=model_cache_root(rt.settings))
    selection = select(
        plan.rows,
        min_margin=cfg.min_margin,
        contaminated=GoldenFilter.from_settings(rt.settings.reward, recipe.workload),
        opted_out=training_exclusions(rt.catalog, mode=rt.settings.consent_mode),
        render=prompt_renderer(base_dir),
        snapshot_id=current_snapshot_id(rt.catalog, "training_examples"),
        windows=sorted({r["window"] for r in plan.rows}),
    )
    selection.workload = recipe.workload  # a workload's adapter is replaced by one for it
    items = {"dpo": selection.pairs, "rft": selection.sft, "grpo": selection.prompts}
    method = recipe.method
    if not items.get(method):
        return None
    hyper = {**recipe.hyperparameters, "method": method}
    if max_steps:
        hyper["max_steps"] = max_steps
    config = TrainConfig(**hyper, lora_output=cfg.lora_output, max_shard_size=cfg.max_shard_size)
    reason = f"erasure replacement: the recipe of {plan.serving} without the erased rows"
    choice = MethodChoice(method=config.method, reason=reason, available=len(items[method]))
    with rt.reporting("train") as report:
        result = train_selection(
            rt,
            report,
            run_id=str(uuid.uuid4()),
            base=plan.base,
            base_dir=base_dir,
            choice=choice,
            selection=selection,
            config=config,
            started=datetime.now(UTC),
        )
    return result.version


def _abort_release(
    rt: Runtime, routing: RoutingBackend, state: RoutingState, cases: list[ErasureCase]
) -> None:
    """A release in progress ends when its candidate saw an erased user (it is retired with
    the others) or when a replacement must be released (the erasure's deadline comes first;
    the candidate is rejected)."""
    if state.candidate is None or state.phase not in ("gating", "shadow", "canary", "held"):
        return
    controls.abort(routing, rt.catalog, actor=ACTOR, reason="an erasure replacement comes first")
    _step(rt, cases, "release aborted", state.candidate, "an erasure replacement comes first")


def _retire(
    rt: Runtime,
    routing: RoutingBackend,
    cases: list[ErasureCase],
    versions: set[str],
    *,
    serving: str,
    how: str,
    **changes: Any,
) -> RoutingState:
    """Retire ``versions`` (with ``changes`` in the same write; ``serving`` is the version
    that serves after it), unload them, mark their cards, and close every case whose
    versions are all retired."""
    receipts = [c.receipt for c in cases]
    state = retire_versions(
        routing,
        rt.catalog,
        versions,
        receipts=receipts,
        actor=ACTOR,
        reason=f"erasure: retired ({how})",
        subject=serving,
        **changes,
    )
    unload_unrouted(rt, open_model_server(rt.settings.model_server), state)
    mark_retired(rt.store, versions, receipts=receipts, replaced_by=serving, how=how)
    at = datetime.now(UTC)
    for case in cases:
        for version, entry in case.versions.items():
            if version in state.retired and entry.status != "retired":
                entry.status, entry.at = "retired", at
                case.add("retired", version, f"{how}; {serving} serves", at=at)
        if not case.serving():
            case.status = "done"
        save_case(rt.store, case)
    return state


def _failed(
    rt: Runtime,
    cases: list[ErasureCase],
    version: str | None,
    why: str,
    outcome: str | None = None,
) -> ReplacementResult:
    for case in cases:
        case.status = "replacement_failed"
    _step(rt, cases, "replacement failed", version or "models", f"{why}; a person must choose")
    get_run_logger().warning(
        "erasure replacement failed (%s): run `flywheel erasure-resolve RECEIPT --rollback` or "
        "`--accept` for receipts %s",
        why,
        ", ".join(c.receipt[:16] for c in cases),
    )
    return ReplacementResult(
        status="failed",
        message=why,
        receipts=[c.receipt for c in cases],
        version=version,
        outcome=outcome,
    )


def _step(rt: Runtime, cases: list[ErasureCase], step: str, subject: str, detail: str) -> None:
    """Append a step to every case in the batch, save them, and audit it per receipt."""
    for case in cases:
        case.add(step, subject, detail)
        save_case(rt.store, case)
        record_event(
            rt.catalog,
            event_type="erasure.step",
            actor=ACTOR,
            subject=case.receipt,
            details={"step": step, "subject": subject, "detail": detail},
            best_effort=True,
        )


def _plan_text(plan: ReplacementPlan) -> str:
    return (
        f"{plan.recipe.method} recipe of {plan.serving} from {plan.base} on the training sets "
        f"of {', '.join(plan.chain)}: {len(plan.rows)} rows, {plan.erased} erased rows left out"
    )


def open_case(
    rt: Runtime, result: Erasure, reached: dict[str, tuple[str, str | None]], *, langfuse: bool
) -> ErasureCase:
    """Record the model side of a forget-user that erased data (its receipt, the versions its
    data reached and their roles, what each store reported); versions that saw the user but
    serve nothing are retired at once."""
    routing = open_routing(rt.settings, rt.store, catalog=rt.catalog)
    stores: dict[str, dict[str, object]] = {
        "tables": dict(result.rows_deleted),
        "objects": {"rewritten": result.objects_rewritten, "deleted": result.objects_deleted},
        "iceberg files": {
            "snapshots_expired": result.snapshots_expired,
            "files_removed": result.orphan_files_removed,
        },
    }
    if langfuse:  # deletes are queued by Langfuse: requested until a read-back confirms them
        stores["langfuse"] = {
            "requested": result.langfuse_traces_deleted + result.langfuse_traces_deferred,
            "confirmed": result.langfuse_traces_confirmed,
        }
    try:
        state = routing.load()
    except TransientError:  # the data is gone already: record the case from the stored state
        state = load_state(rt.store)
    case = new_case(
        receipt=result.receipt,
        reached=reached,
        state=state,
        bake_s=rt.settings.model_server.bake_s,
        deadline_days=rt.settings.erasure.deadline_days,
        stores=stores,
    )
    idle = {v for v, e in case.versions.items() if e.role != "retired"}
    if case.status == "done" and idle:
        case.status = "pending"  # until retired: the weekly run retires them if this fails
    save_case(rt.store, case)
    if idle and case.status == "pending" and not case.serving_roles():
        try:
            _retire(rt, routing, [case], idle, serving=state.stable, how="not serving")
        except TransientError as exc:
            get_run_logger().warning("versions not retired yet (%s); the weekly run will", exc)
    publish_gauges(rt)
    return load_case(rt.store, case.receipt)


Resolution = Literal["rollback", "accept"]


@flow(name="erasure-resolve", log_prints=False)
def erasure_resolve(
    receipt: Receipt, action: Resolution, reason: str, actor: str = "person"
) -> ErasureCase:
    """A person's choice after an erasure's replacement failed the gate: roll back to the
    newest version that never saw an erased user, or accept the replacement's regression and
    make it the stable version. Either way every version that saw the user is retired, and
    the choice is audited with the receipt.

    Args:
        receipt: The erasure's receipt, as forget-user printed it.
        action: rollback (the newest version that never saw the user) or accept (the
            failed replacement, regression and all).
        reason: Why, in a few words; recorded in the audit log (no personal data).
        actor: Who decided; recorded in the audit log.
    """
    if not reason.strip():
        raise ControlRefused("an erasure resolution needs a reason (it is audited)")
    rt = Runtime.from_env()
    routing = open_routing(rt.settings, rt.store, catalog=rt.catalog)
    case = load_case(rt.store, receipt)
    if case.status != "replacement_failed":
        raise ControlRefused(f"erasure {receipt[:16]} is {case.status}: nothing to resolve")
    cases = [c for c in open_cases(rt.store) if c.status == "replacement_failed"]
    affected = reached(cases)
    versions = ServableVersions.from_settings(rt.settings, rt.store)
    state = routing.load()
    target = _resolution_target(state, case, action, affected, versions)
    changes: dict[str, object] = {"stable": target, "candidate": None, "weight": 0.0}
    changes |= {
        "shadow_fraction": 0.0,
        "step": 0,
        "rejected": [v for v in state.rejected if v != target],
    }
    changes["phase"] = "promoted" if action == "accept" else "rolled_back"
    changes["evidence"] = {"erasure": action, "previous_stable": state.stable, "reason": reason}
    _step(rt, cases, f"resolved: {action}", target, f"by {actor}: {reason}")
    for c in cases:
        record_event(
            rt.catalog,
            event_type="erasure.resolved",
            actor=actor,
            subject=c.receipt,
            details={"action": action, "stable": target, "reason": reason, "receipt": receipt},
        )
    _retire(rt, routing, cases, affected - {target}, serving=target, how=action, **changes)
    publish_gauges(rt)
    return load_case(rt.store, receipt)


def _resolution_target(
    state: RoutingState,
    case: ErasureCase,
    action: Resolution,
    affected: set[str],
    versions: ServableVersions,
) -> str:
    if action == "accept":
        if case.replacement is None:
            raise ControlRefused("no replacement was trained for this erasure; roll back instead")
        versions.require(case.replacement)
        return case.replacement
    target = rollback_target(state, avoid=affected, servable=versions.servable)
    if target is None:
        raise ControlRefused("no earlier servable version that never saw the user; accept instead")
    return target
