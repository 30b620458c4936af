"""The routing state (``deploy/state.json``): which version is stable, which is the candidate,
at what weight and shadow fraction, in which release phase, plus the history of transitions.

Writers use compare-and-swap on ``revision``: :func:`save_state` refuses to overwrite a state
that changed since it was loaded, so a release flow holding a stale copy can never undo a
rollback the gateway wrote in the meantime. :func:`rollback` is the one rollback used by the
gateway's fast path and by flows: state first, audit event after (an audit failure is logged and
never blocks the rollback).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from infra.errors import ObjectNotFound, ReleaseError
from infra.keys import STATE_KEY

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.store import ObjectStore

log = logging.getLogger(__name__)

MAX_FINGERPRINTS = 1000

Phase = Literal["idle", "gating", "shadow", "canary", "promoted", "rolled_back", "held"]


class StateConflict(ReleaseError):
    """The stored state changed since it was loaded; reload, reapply, save again."""


class Transition(BaseModel):
    """One entry of the state's history (also written to ``audit_log`` by its author)."""

    at: datetime
    from_phase: Phase
    to_phase: Phase
    candidate: str | None = None
    weight: float = 0.0
    actor: str
    reason: str
    evidence: dict[str, Any] = {}


class RoutingState(BaseModel):
    """DESIGN "routing state". ``weight`` is the candidate's share of routed traffic in percent."""

    stable: str = "v0"
    candidate: str | None = None
    phase: Phase = "idle"
    weight: float = Field(default=0.0, ge=0.0, le=100.0)
    shadow_fraction: float = Field(default=0.0, ge=0.0, le=1.0)
    step: int = 0
    rejected: list[str] = []
    history: list[Transition] = []
    alert_fingerprints: list[str] = []  # Alertmanager fingerprints already acted on
    revision: int = 0  # bumped by every save; compare-and-swap key
    updated_at: datetime | None = None

    def routable_candidate(self) -> str | None:
        """The candidate if it may receive traffic (set, not rejected, not the stable one)."""
        cand = self.candidate
        if cand is None or cand in self.rejected or cand == self.stable:
            return None
        return cand


def load_state(store: ObjectStore) -> RoutingState:
    """The stored routing state, or the default (``v0`` stable, no candidate) when none exists.

    Raises:
        ReleaseError: the stored state is not valid JSON for :class:`RoutingState`.
    """
    try:
        raw = store.get(STATE_KEY)
    except ObjectNotFound:
        return RoutingState()
    return parse_state(raw)


def parse_state(raw: bytes) -> RoutingState:
    try:
        return RoutingState.model_validate_json(raw)
    except ValidationError as exc:
        raise ReleaseError(f"{STATE_KEY} is invalid: {exc.error_count()} error(s)") from exc


def save_state(store: ObjectStore, state: RoutingState, *, force: bool = False) -> RoutingState:
    """Write ``state`` (one atomic PUT) if the stored revision is still ``state.revision``.

    Returns the state as written (revision + 1, ``updated_at`` now).

    Raises:
        StateConflict: someone saved since ``state`` was loaded (skipped with ``force=True``).
    """
    if not force:
        current = load_state(store)
        if current.revision != state.revision:
            raise StateConflict(
                f"{STATE_KEY} changed (revision {current.revision}, expected {state.revision})"
            )
    new = state.model_copy(update={"revision": state.revision + 1, "updated_at": _now()})
    store.put(STATE_KEY, new.model_dump_json(indent=1).encode())
    return new


def record_transition(
    state: RoutingState,
    *,
    to_phase: Phase,
    actor: str,
    reason: str,
    evidence: dict[str, Any] | None = None,
    **changes: Any,
) -> RoutingState:
    """A copy of ``state`` moved to ``to_phase`` with ``changes`` applied and history appended."""
    new = state.model_copy(update={**changes, "phase": to_phase}, deep=True)
    new.history.append(
        Transition(
            at=_now(),
            from_phase=state.phase,
            to_phase=to_phase,
            candidate=new.candidate,
            weight=new.weight,
            actor=actor,
            reason=reason,
            evidence=evidence or {},
        )
    )
    return RoutingState.model_validate(new.model_dump())


def apply_rollback(
    state: RoutingState,
    *,
    reason: str,
    actor: str,
    evidence: dict[str, Any] | None = None,
    fingerprints: list[str] | None = None,
) -> RoutingState | None:
    """The rolled-back state (weight 0, shadow 0, candidate rejected), or None if nothing routes
    to a candidate any more (a rollback is idempotent)."""
    cand = state.candidate
    if cand is None and state.weight == 0 and state.shadow_fraction == 0:
        return None
    rejected = list(state.rejected)
    if cand is not None and cand not in rejected and cand != state.stable:
        rejected.append(cand)
    seen = (state.alert_fingerprints + list(fingerprints or []))[-MAX_FINGERPRINTS:]
    new = record_transition(
        state,
        to_phase="rolled_back",
        actor=actor,
        reason=reason,
        evidence=evidence,
        weight=0.0,
        shadow_fraction=0.0,
        rejected=rejected,
        alert_fingerprints=seen,
    )
    new.history[-1].candidate = cand
    new.candidate = None
    return new


def rollback(
    store: ObjectStore,
    *,
    reason: str,
    actor: str,
    evidence: dict[str, Any] | None = None,
    catalog: Catalog | None = None,
    fingerprints: list[str] | None = None,
) -> RoutingState:
    """Take the candidate away from users now: weight 0, shadow 0, phase ``rolled_back``, the
    candidate recorded as rejected. Writes the state first, then (when ``catalog`` is given)
    one ``rollback`` audit event; an audit failure is logged, never raised. Returns the stored
    state (unchanged when nothing was routed to a candidate: a rollback is idempotent).

    Raises:
        StateConflict: the state kept changing under us.
        StoreError: the state could not be written.
    """
    saved, before = persist_rollback(
        store, reason=reason, actor=actor, evidence=evidence, fingerprints=fingerprints
    )
    if catalog is not None and before is not None:
        write_rollback_audit(catalog, saved, before=before)
    return saved


def persist_rollback(
    store: ObjectStore,
    *,
    reason: str,
    actor: str,
    evidence: dict[str, Any] | None = None,
    fingerprints: list[str] | None = None,
    attempts: int = 5,
) -> tuple[RoutingState, RoutingState | None]:
    """The state part of :func:`rollback`: ``(stored state, state before)``; ``before`` is None
    when there was nothing to roll back (nothing written)."""
    for attempt in range(attempts):
        state = load_state(store)
        new = apply_rollback(
            state, reason=reason, actor=actor, evidence=evidence, fingerprints=fingerprints
        )
        if new is None:
            return state, None
        try:
            return save_state(store, new), state
        except StateConflict:
            time.sleep(0.05 * (attempt + 1))
    raise StateConflict(f"{STATE_KEY} kept changing; rollback not written after {attempts} tries")


def write_rollback_audit(catalog: Catalog, saved: RoutingState, *, before: RoutingState) -> bool:
    """Append the ``rollback`` audit event for the last transition of ``saved``; False on failure."""
    last = saved.history[-1]
    details = {
        "reason": last.reason,
        "evidence": last.evidence,
        "from_phase": before.phase,
        "weight_before": before.weight,
        "shadow_fraction_before": before.shadow_fraction,
        "stable": saved.stable,
        "revision": saved.revision,
    }
    return write_audit(
        catalog,
        event_type="rollback",
        actor=last.actor,
        subject=last.candidate or "",
        details=details,
        at=last.at,
    )


def write_audit(
    catalog: Catalog,
    *,
    event_type: str,
    actor: str,
    subject: str,
    details: dict[str, Any],
    at: datetime | None = None,
    attempts: int = 3,
) -> bool:
    """Append one ``audit_log`` row, retrying commit conflicts; logs and returns False on failure."""
    from infra.audit import audit_row
    from infra.catalog import append_rows

    row = audit_row(event_type=event_type, actor=actor, subject=subject, details=details)
    if at is not None:
        row["at"] = at
    for attempt in range(attempts):
        try:
            append_rows(catalog, "audit_log", [row])
            return True
        except Exception as exc:  # noqa: BLE001 - an audit failure must never block a rollback
            log.warning("audit %s attempt %d failed: %s", event_type, attempt + 1, exc)
            time.sleep(0.2 * (attempt + 1))
    log.error("audit event %s for %s was not written", event_type, subject)
    return False


def _now() -> datetime:
    return datetime.now(UTC)
