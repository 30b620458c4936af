"""The audit events of routing decisions: one details builder for every transition and
rollback (what changed, from what, why, in which release), and the event a refused stale
decision leaves. Best effort: an audit failure is logged and never blocks a decision."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.routing.state import RoutingState

log = logging.getLogger(__name__)


def decision_details(saved: RoutingState, *, before: RoutingState) -> dict[str, Any]:
    """The details of the audit event for the last transition of ``saved`` (read before as
    ``before``): phases, routing before and after, the release and the evidence."""
    last = saved.history[-1]
    workload = {"workload": saved.workload} if saved.workload is not None else {}
    return workload | {
        "from_phase": before.phase,
        "to_phase": saved.phase,
        "reason": last.reason,
        "evidence": last.evidence,
        "weight": saved.weight,
        "weight_before": before.weight,
        "shadow_fraction": saved.shadow_fraction,
        "shadow_fraction_before": before.shadow_fraction,
        "step": saved.step,
        "stable": saved.stable,
        "stable_before": before.stable,
        "release_id": saved.release_id,
        "revision": saved.revision,
    }


def record_decision(
    catalog: Catalog,
    saved: RoutingState,
    *,
    before: RoutingState,
    event_type: str,
    subject: str | None = None,
) -> bool:
    """Append the audit event (``release_transition``, ``rollback``) for the last transition
    of ``saved``; False (logged) when it could not be written."""
    from infra.audit import record_event

    last = saved.history[-1]
    event = record_event(
        catalog,
        event_type=event_type,
        actor=last.actor,
        subject=subject or last.candidate or "",
        details=decision_details(saved, before=before),
        at=last.at,
        best_effort=True,
    )
    return event is not None


def record_rollback(
    catalog: Catalog,
    saved: RoutingState,
    *,
    before: RoutingState,
    workload: str | None = None,
) -> bool:
    """The ``rollback`` audit event for the last transition of ``saved`` (of ``workload``'s
    release when given: the event reads that workload's history)."""
    return record_decision(
        catalog,
        saved.release_of(workload),
        before=before.release_of(workload),
        event_type="rollback",
    )


def record_stale(
    catalog: Catalog | None,
    found: RoutingState,
    *,
    actor: str,
    version: str | None,
    release_id: str | None,
    asked: str,
    why: str,
) -> None:
    """Log, and audit as ``stale_decision``, a decision about ``version`` (release
    ``release_id``; either may be None: not named) that was not made because another release
    is current (``found``)."""
    log.warning("stale decision not made: %s %s: %s", asked, version or release_id, why)
    if catalog is None:
        return
    from infra.audit import record_event

    details = {
        "asked": asked,
        "why": why,
        "release_id": release_id,
        "current_release_id": found.release_id,
        "current_candidate": found.candidate,
        "workload": found.workload,
        "phase": found.phase,
        "revision": found.revision,
    }
    record_event(
        catalog,
        event_type="stale_decision",
        actor=actor,
        subject=version or "",
        details=details,
        best_effort=True,
    )
