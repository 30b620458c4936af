"""``erasure-resolve``: a person's choice after an erasure's replacement failed the gate, for
the release line it failed on (the shared one, or a workload's own with ``workload``)."""

from __future__ import annotations

from typing import Any, Literal

from prefect import flow, get_run_logger

from infra.audit import record_event
from infra.errors import ControlRefused
from infra.flow_docs import described
from infra.models import ServableVersions
from infra.parameters import Receipt, Workload
from infra.routing import RoutingBackend, RoutingState, StateChange, open_routing, scoped
from infra.routing.state import own_workload
from infra.runtime import Runtime
from infra.traces.conversation import DEFAULT_WORKLOAD
from tasks.governance.erasure_steps import record_step, retire_cases
from tasks.governance.reach import ErasureCase, load_case, open_cases, publish_gauges, save_case
from tasks.governance.replacement import (
    line_rollback_target,
    reached,
    rollback_target,
    routed_versions,
)
from tasks.run_report import publish_outcome

Resolution = Literal["rollback", "accept"]


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
    line = _check_line(case, own_workload(workload))
    cases = [c for c in open_cases(rt.store) if c.status == "replacement_failed"]
    routing = open_routing(rt.settings, rt.store, catalog=rt.catalog)
    versions = ServableVersions.from_settings(rt.settings, rt.store)
    changes: dict[str, Any] = {}
    if line == DEFAULT_WORKLOAD:
        target, detail, changes = _resolve_shared(routing, cases, case, action, versions, reason)
    else:
        target, detail = _resolve_workload(routing, cases, case, line, action, versions, reason)
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
    _retire_unserved(rt, routing, cases, line, target, action, changes)
    publish_gauges(rt)
    summary = f"erasure {receipt[:16]} resolved by {actor}: {detail} ({reason})"
    get_run_logger().info(summary)
    details = {"action": action, "line": line, "stable": target, "cases": str(len(cases))}
    publish_outcome(key="erasure-resolve", summary=summary, details=details)
    return load_case(rt.store, receipt)


def _check_line(case: ErasureCase, workload: str | None) -> str:
    """The line to resolve: ``workload`` (``default``: the shared one), which must be one
    the case's replacement failed on; the shared line only when no workload's line failed."""
    failed = sorted(w for w in case.failed_on if w != DEFAULT_WORKLOAD)
    name = workload or DEFAULT_WORKLOAD
    if workload is None and failed:
        names = " or ".join(f"--workload {w}" for w in failed)
        raise ControlRefused(
            f"erasure {case.receipt[:16]}'s replacement failed on the line of workload "
            f"{', '.join(failed)}: name it ({names}); nothing changed"
        )
    if workload is not None and workload not in case.failed_on:
        where = f"workload {', '.join(failed)}" if failed else "the shared line (no --workload)"
        raise ControlRefused(
            f"erasure {case.receipt[:16]}'s replacement did not fail on workload {workload}'s "
            f"line but on {where}; nothing changed"
        )
    return name


def _resolve_shared(
    routing: RoutingBackend,
    cases: list[ErasureCase],
    case: ErasureCase,
    action: Resolution,
    versions: ServableVersions,
    reason: str,
) -> tuple[str, str, dict[str, Any]]:
    """The shared line's new stable version (the rollback target or the replacement), what
    is done, and the changes that make it so (written with the retirement, in one write)."""
    state = routing.load()
    if action == "accept":
        target = _accepted(case.failed_on.get(DEFAULT_WORKLOAD) or case.replacement, versions)
    else:
        found = rollback_target(state, avoid=reached(cases), servable=versions.servable)
        target = _found(found)
    changes = _line_changes(state, target, action, reason)
    verb = "accepts" if action == "accept" else "rolls back to"
    return target, f"the shared line {verb} {target}", changes


def _resolve_workload(
    routing: RoutingBackend,
    cases: list[ErasureCase],
    case: ErasureCase,
    workload: str,
    action: Resolution,
    versions: ServableVersions,
    reason: str,
) -> tuple[str, str]:
    """Make ``workload``'s stable version its rollback target (its own earlier version, or
    the shared stable one) or its failed replacement; returns (the version, what was done)."""
    state = routing.load()
    view = state.release_of(workload)
    if action == "accept":
        target = _accepted(case.failed_on.get(workload), versions)
        done = f"workload {workload} accepts {target}"
    else:
        avoid = reached(cases)
        target = _found(
            line_rollback_target(state, workload, avoid=avoid, servable=versions.servable)
        )
        which = "the shared stable version" if target == state.stable else "its own earlier version"
        done = f"workload {workload} rolls back to {target} ({which})"
    change = StateChange(
        **_line_changes(view, target, action, reason),
        subject=target,
        actor="erasure-resolve",
        reason=f"erasure resolved: {action} on workload {workload}",
    )
    scoped(routing, workload).transition(change)
    return target, done


def _line_changes(
    line: RoutingState, target: str, action: Resolution, reason: str
) -> dict[str, Any]:
    """What a resolution changes on a release line (``line``: its view): ``target`` serves
    all of its traffic, its release ends, and the evidence names the choice."""
    return {
        "stable": target,
        "candidate": None,
        "weight": 0.0,
        "shadow_fraction": 0.0,
        "step": 0,
        "rejected": [v for v in line.rejected if v != target],
        "phase": "promoted" if action == "accept" else "rolled_back",
        "evidence": {"erasure": action, "previous_stable": line.stable, "reason": reason},
    }


def _accepted(replacement: str | None, versions: ServableVersions) -> str:
    if not replacement:
        raise ControlRefused("no replacement was trained for this erasure; roll back instead")
    versions.require(replacement)
    return replacement


def _found(target: str | None) -> str:
    if target is None:
        raise ControlRefused("no earlier servable version that never saw the user; accept instead")
    return target


def _retire_unserved(
    rt: Runtime,
    routing: RoutingBackend,
    cases: list[ErasureCase],
    line: str,
    target: str,
    action: Resolution,
    changes: dict[str, Any],
) -> None:
    """Retire what saw the user and no line serves once ``changes`` (the shared line's, if
    any) are made, in the same write; the resolved line no longer waits for a person, and a
    case whose versions another line still serves waits for the weekly run (pending) or,
    while another line's failure is unresolved, for a person."""
    after = routing.load().model_copy(
        update={k: changes[k] for k in ("stable", "candidate") if k in changes}
    )
    retire = reached(cases) - {target} - routed_versions(after)
    how = action if line == DEFAULT_WORKLOAD else f"{action} on workload {line}"
    for c in cases:
        c.failed_on.pop(line, None)
    retire_cases(rt, routing, cases, retire, serving=target, how=how, **changes)
    for c in cases:
        if c.status != "done":
            c.status = "replacement_failed" if c.failed_on else "pending"
            save_case(rt.store, c)
