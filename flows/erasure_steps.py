"""What the erasure flows share: the replacement run's result, and the steps every case in a
batch records (a step, a failure that waits for a person, the retirement that closes it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from prefect import get_run_logger

from flows.release_server import unload_unrouted
from infra.audit import record_event
from infra.model_server import open_model_server
from infra.routing import RoutingBackend, RoutingState
from infra.runtime import Runtime
from infra.traces.conversation import DEFAULT_WORKLOAD
from tasks.governance.reach import ErasureCase, save_case
from tasks.governance.replacement import mark_retired, retire_versions

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
