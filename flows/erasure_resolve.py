"""``erasure-resolve``: a person's choice after an erasure's replacement failed the gate, for
the release line it failed on (the shared one, or a workload's own with ``workload``)."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from infra.audit import record_event
from infra.errors import ControlRefused
from infra.flow_docs import described
from infra.parameters import Receipt, Workload
from infra.routing import open_routing
from infra.routing.state import own_workload
from infra.runtime import Runtime
from infra.serving.models import ServableVersions
from infra.traces.conversation import DEFAULT_WORKLOAD
from tasks.governance.erasure_steps import record_step
from tasks.governance.reach import ErasureCase, load_case, open_cases, publish_gauges
from tasks.governance.resolution import (
    Resolution,
    check_line,
    resolve_shared,
    resolve_workload,
    retire_unserved,
)
from tasks.run_report import publish_outcome

__all__ = ["Resolution", "erasure_resolve"]


@described
@flow(name="erasure-resolve", log_prints=False)
def erasure_resolve(
    receipt: Receipt,
    action: Resolution,
    reason: str,
    actor: str = "person",
    workload: Workload | None = None,
) -> ErasureCase:
    """A person's choice after an erasure's replacement failed the gate: roll back to the
    newest version that never saw an erased user, or accept the replacement's regression and
    make it the stable version, on the line the replacement failed on. Then every version
    that saw the user and that no line serves is retired, and the choice is audited with the
    receipt and the workload.

    Args:
        receipt: The erasure's receipt, as forget-user printed it.
        action: rollback (the newest version that never saw the user) or accept (the
            failed replacement, regression and all).
        reason: Why, in a few words; recorded in the audit log (no personal data).
        actor: Who decided; recorded in the audit log.
        workload: The workload whose own line the replacement failed on; empty: the
            shared line. A workload's line rolls back to its own earlier version, or to the
            shared stable version when it has none.
    """
    if not reason.strip():
        raise ControlRefused("an erasure resolution needs a reason (it is audited)")
    rt = Runtime.from_env()
    case = load_case(rt.store, receipt)
    if case.status != "replacement_failed":
        raise ControlRefused(f"erasure {receipt[:16]} is {case.status}: nothing to resolve")
    line = check_line(case, own_workload(workload))
    cases = [c for c in open_cases(rt.store) if c.status == "replacement_failed"]
    routing = open_routing(rt.settings, rt.store, catalog=rt.catalog)
    versions = ServableVersions.from_settings(rt.settings, rt.store)
    changes: dict[str, Any] = {}
    if line == DEFAULT_WORKLOAD:
        target, detail, changes = resolve_shared(routing, cases, case, action, versions, reason)
    else:
        target, detail = resolve_workload(routing, cases, case, line, action, versions, reason)
    record_step(rt, cases, f"resolved: {action}", target, f"by {actor}: {detail}: {reason}")
    for c in cases:
        details = {"action": action, "workload": line, "stable": target, "reason": reason}
        record_event(
            rt.catalog,
            event_type="erasure.resolved",
            actor=actor,
            subject=c.receipt,
            details={**details, "receipt": receipt},
        )
    retire_unserved(rt, routing, cases, line, target, action, changes)
    publish_gauges(rt)
    summary = f"erasure {receipt[:16]} resolved by {actor}: {detail} ({reason})"
    get_run_logger().info(summary)
    details = {"action": action, "line": line, "stable": target, "cases": str(len(cases))}
    publish_outcome(key="erasure-resolve", summary=summary, details=details)
    return load_case(rt.store, receipt)
