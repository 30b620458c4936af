"""A person's resolution of an erasure whose replacement failed the gate (the
``erasure-resolve`` flow, flows/erasure_resolve.py): the line it acts on, the version that
line serves after it (a rollback target or the accepted replacement), and the retirement of
what saw the user and no line serves any more."""

from __future__ import annotations

from typing import Any, Literal

from infra.errors import ControlRefused
from infra.routing import RoutingBackend, RoutingState, StateChange, scoped
from infra.runtime import Runtime
from infra.serving.models import ServableVersions
from infra.traces.conversation import DEFAULT_WORKLOAD
from tasks.governance.erasure_steps import retire_cases
from tasks.governance.reach import ErasureCase, save_case
from tasks.governance.replacement import (
    line_rollback_target,
    reached,
    rollback_target,
    routed_versions,
)

Resolution = Literal["rollback", "accept"]


def check_line(case: ErasureCase, workload: str | None) -> str:
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


def resolve_shared(
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
        target = accepted_replacement(
            case.failed_on.get(DEFAULT_WORKLOAD) or case.replacement, versions
        )
    else:
        found = rollback_target(state, avoid=reached(cases), servable=versions.servable)
        target = found_target(found)
    changes = line_changes(state, target, action, reason)
    verb = "accepts" if action == "accept" else "rolls back to"
    return target, f"the shared line {verb} {target}", changes


def resolve_workload(
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
        target = accepted_replacement(case.failed_on.get(workload), versions)
        done = f"workload {workload} accepts {target}"
    else:
        avoid = reached(cases)
        target = found_target(
            line_rollback_target(state, workload, avoid=avoid, servable=versions.servable)
        )
        which = "the shared stable version" if target == state.stable else "its own earlier version"
        done = f"workload {workload} rolls back to {target} ({which})"
    change = StateChange(
        **line_changes(view, target, action, reason),
        subject=target,
        actor="erasure-resolve",
        reason=f"erasure resolved: {action} on workload {workload}",
    )
    scoped(routing, workload).transition(change)
    return target, done


def line_changes(
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


def accepted_replacement(replacement: str | None, versions: ServableVersions) -> str:
    """The replacement an erasure case may accept (it must exist and be servable); refuses
    otherwise."""
    if not replacement:
        raise ControlRefused("no replacement was trained for this erasure; roll back instead")
    versions.require(replacement)
    return replacement


def found_target(target: str | None) -> str:
    """The earlier version a rollback resolution returns to; refuses when there is none."""
    if target is None:
        raise ControlRefused("no earlier servable version that never saw the user; accept instead")
    return target


def retire_unserved(
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
