"""What the erasure flows share: the case a forget-user opens (:func:`open_case`), the
replacement run's result, and the steps every case in a batch records (a step, a failure that
waits for a person, the retirement that closes it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from prefect import get_run_logger

from infra.audit import record_event
from infra.errors import TransientError
from infra.routing import RoutingBackend, RoutingState, load_state, open_routing
from infra.runtime import Runtime
from infra.serving.base_servers import open_model_server
from infra.traces.conversation import DEFAULT_WORKLOAD
from tasks.governance.erasure import Erasure
from tasks.governance.reach import (
    ErasureCase,
    create_case,
    load_case,
    new_case,
    publish_gauges,
    save_case,
)
from tasks.governance.replacement import mark_retired, retire_versions
from tasks.release.machine.serving import unload_unrouted

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
    replacements: dict[str, str] = field(default_factory=dict)  # release line -> its version


def retire_cases(
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
    unload_unrouted(rt, open_model_server(rt.settings, rt.store), state)
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


def fail_cases(
    rt: Runtime,
    cases: list[ErasureCase],
    version: str | None,
    why: str,
    *,
    line: str,
    outcome: str | None = None,
) -> ReplacementResult:
    """Mark every case in the batch ``replacement_failed`` on release ``line`` (a workload,
    or ``default``: the shared line) with its failed replacement (a person must choose),
    record why, and log the receipts' prefixes with the command to run."""
    for case in cases:
        case.status = "replacement_failed"
        case.failed_on[line] = version or ""
    record_step(
        rt, cases, "replacement failed", version or "models", f"{why}; a person must choose"
    )
    get_run_logger().warning(
        "erasure replacement failed (%s): run `flywheel erasure-resolve RECEIPT%s --rollback` "
        "or `--accept` for receipts %s",
        why,
        "" if line == DEFAULT_WORKLOAD else f" --workload {line}",
        ", ".join(c.receipt[:16] for c in cases),
    )
    return ReplacementResult(
        status="failed",
        message=why,
        receipts=[c.receipt for c in cases],
        version=version,
        outcome=outcome,
    )


def record_step(
    rt: Runtime, cases: list[ErasureCase], step: str, subject: str, detail: str
) -> None:
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


def open_case(
    rt: Runtime,
    result: Erasure,
    reached: dict[str, tuple[str, str | None]],
    *,
    langfuse: bool,
    earlier: list[str] | None = None,
) -> ErasureCase:
    """Record the model side of a forget-user that erased data (its receipt, the versions its
    data reached and their roles, what each store reported, the receipts of the same person's
    ``earlier`` requests, whose cases are left as they are); versions that saw the user but
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
    for receipt in earlier or []:
        case.add("earlier request", "receipt", f"{receipt[:16]}... (same person; kept as it is)")
    idle = {v for v, e in case.versions.items() if e.role != "retired"}
    if case.status == "done" and idle:
        case.status = "pending"  # until retired: the weekly run retires them if this fails
    create_case(rt.store, case)  # the receipt is this request's alone (request_receipts)
    if idle and case.status == "pending" and not case.serving_roles():
        try:
            retire_cases(rt, routing, [case], idle, serving=state.stable, how="not serving")
        except TransientError as exc:
            get_run_logger().warning("versions not retired yet (%s); the weekly run will", exc)
    publish_gauges(rt)
    return load_case(rt.store, case.receipt)
