"""The routing state (``deploy/state.json``): which version is stable, which is the candidate,
at what weight and shadow fraction, in which release phase, plus the history of transitions;
and the pure functions that change it (nothing here reads or writes anything)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from infra.errors import RejectedVersion, ReleaseError, StateConflict
from infra.keys import STATE_KEY

MAX_FINGERPRINTS = 1000

Phase = Literal["idle", "gating", "shadow", "canary", "promoted", "rolled_back", "held"]


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
    retired: list[str] = []  # trained on erased data: never routed or released again
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


class StateChange(BaseModel):
    """One transition (the body of ``POST /admin/state``): the fields to change (unset fields
    keep their value), why, and ``expected_revision``, which refuses to overwrite a state
    that changed since the caller read it."""

    stable: str | None = None
    candidate: str | None = None
    phase: Phase | None = None
    weight: float | None = Field(default=None, ge=0, le=100)
    shadow_fraction: float | None = Field(default=None, ge=0, le=1)
    step: int | None = None
    rejected: list[str] | None = None
    retired: list[str] | None = None
    subject: str | None = None  # the version the history entry names (default: the candidate)
    reason: str = "admin update"
    actor: str = "admin"
    evidence: dict[str, Any] = {}
    expected_revision: int | None = None
    force: bool = False  # allow routing traffic to a rejected version


_ROUTING_FIELDS = {"stable", "candidate", "weight", "shadow_fraction", "step", "rejected"}
_ROUTING_FIELDS |= {"retired"}


def parse_state(raw: bytes) -> RoutingState:
    """The state in ``raw`` (JSON).

    Raises:
        ReleaseError: it is not valid JSON for :class:`RoutingState`.
    """
    try:
        return RoutingState.model_validate_json(raw)
    except ValidationError as exc:
        raise ReleaseError(f"{STATE_KEY} is invalid: {exc.error_count()} error(s)") from exc


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


def apply_change(state: RoutingState, change: StateChange) -> RoutingState:
    """``state`` after ``change`` (not yet written).

    Raises:
        StateConflict: ``change.expected_revision`` is not the state's revision.
        RejectedVersion: the change routes traffic to a rejected version without ``force``.
    """
    if change.expected_revision is not None and change.expected_revision != state.revision:
        raise StateConflict(
            f"state is at revision {state.revision}, not {change.expected_revision}"
        )
    fields = change.model_dump(include=_ROUTING_FIELDS, exclude_unset=True)
    new = record_transition(
        state,
        to_phase=change.phase or state.phase,
        actor=change.actor,
        reason=change.reason,
        evidence=change.evidence,
        **fields,
    )
    if change.subject is not None:
        new.history[-1].candidate = change.subject
    routed = new.candidate and (new.weight > 0 or new.shadow_fraction > 0)
    if routed and new.candidate in new.rejected and not change.force:
        raise RejectedVersion(f"{new.candidate} was rejected; pass force=true to route it")
    routed_to = [new.stable] + ([new.candidate] if routed and new.candidate else [])
    if retired := sorted(set(routed_to) & set(new.retired)):
        raise RejectedVersion(
            f"{retired[0]} was retired after an erasure; it is never routed again"
        )
    return new


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


def _now() -> datetime:
    return datetime.now(UTC)
