"""The routing state (``deploy/state.json``) and the one interface that changes it.

The state says which version is stable, which is the candidate, at what weight and shadow
fraction, in which release phase, plus the history of transitions. Every write is a
compare-and-swap on ``revision``, so a writer holding a stale copy (a canary step) can never
undo a rollback written meanwhile (the gateway's alert fast path).

:class:`RoutingBackend` has two implementations, picked by :func:`open_routing`:

- :class:`StoreRouting`: the state object in the object store, written with a truly atomic
  conditional write (:meth:`infra.store.ObjectStore.put_if`); the gateway persists through it.
- :class:`GatewayRouting`: the gateway's admin API (``GET/POST /admin/state``,
  ``POST /admin/rollback``), used whenever a gateway URL is configured, so that the gateway
  applies every change at once.

A rollback writes the state first and its ``rollback`` audit event after; an audit failure is
logged and never blocks the rollback.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

import httpx
from pydantic import BaseModel, Field, ValidationError

from infra.errors import (
    ConfigError,
    GatewayUnavailable,
    ObjectNotFound,
    PreconditionFailed,
    RejectedVersion,
    ReleaseError,
    StateConflict,
)
from infra.keys import STATE_KEY

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

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
    subject: str | None = None  # the version the history entry names (default: the candidate)
    reason: str = "admin update"
    actor: str = "admin"
    evidence: dict[str, Any] = {}
    expected_revision: int | None = None
    force: bool = False  # allow routing traffic to a rejected version


_ROUTING_FIELDS = {"stable", "candidate", "weight", "shadow_fraction", "step", "rejected"}


# ---- the state model: pure functions --------------------------------------------------------


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


# ---- the state object in the store ----------------------------------------------------------


def load_state(store: ObjectStore) -> RoutingState:
    """The stored routing state, or the default (``v0`` stable, no candidate) when none exists.

    Raises:
        ReleaseError: the stored state is not valid JSON for :class:`RoutingState`.
    """
    return _read(store)[0]


def save_state(store: ObjectStore, state: RoutingState, *, force: bool = False) -> RoutingState:
    """Write ``state`` if the stored revision is still ``state.revision`` (one atomic
    conditional write). Returns the state as written (revision + 1, ``updated_at`` now).

    Raises:
        StateConflict: someone saved since ``state`` was loaded (skipped with ``force=True``).
    """
    if force:
        new = _bumped(state)
        store.put(STATE_KEY, new.model_dump_json(indent=1).encode())
        return new
    current, etag = _read(store)
    if current.revision != state.revision:
        raise StateConflict(
            f"{STATE_KEY} changed (revision {current.revision}, expected {state.revision})"
        )
    return _write(store, state, etag=etag)


def _read(store: ObjectStore) -> tuple[RoutingState, str | None]:
    try:
        raw, etag = store.get_versioned(STATE_KEY)
    except ObjectNotFound:
        return RoutingState(), None
    return parse_state(raw), etag


def _write(store: ObjectStore, state: RoutingState, *, etag: str | None) -> RoutingState:
    """Write ``state`` (revision bumped) only if the stored object is still ``etag``."""
    new = _bumped(state)
    try:
        store.put_if(STATE_KEY, new.model_dump_json(indent=1).encode(), etag=etag)
    except PreconditionFailed as exc:
        raise StateConflict(f"{STATE_KEY} changed since revision {state.revision}") from exc
    return new


def _bumped(state: RoutingState) -> RoutingState:
    return state.model_copy(update={"revision": state.revision + 1, "updated_at": _now()})


# ---- the interface and its two backends -----------------------------------------------------


class RoutingBackend(Protocol):
    """Where stages and flows read and change the routing state."""

    name: str

    def load(self) -> RoutingState:
        """The current routing state."""
        ...

    def transition(self, change: StateChange) -> RoutingState:
        """Apply ``change`` atomically; returns the state written.

        Raises:
            StateConflict: the state is not at ``change.expected_revision`` any more (or
                changed during the write): reload, reapply, write again.
            RejectedVersion: the change routes traffic to a rejected version.
        """
        ...

    def rollback(
        self,
        *,
        reason: str,
        actor: str,
        evidence: dict[str, Any] | None = None,
        fingerprints: list[str] | None = None,
    ) -> tuple[bool, RoutingState]:
        """Take the candidate away now (weight 0, shadow 0, recorded as rejected) and record
        the ``rollback`` audit event; returns (whether anything was rolled back, the state)."""
        ...


class StoreRouting:
    """The routing state in the object store, changed by atomic compare-and-swap."""

    name = "store"

    def __init__(self, store: ObjectStore, *, catalog: Catalog | None = None) -> None:
        self.store = store
        self.catalog = catalog  # where rollbacks write their audit event (None: nowhere)

    def load(self) -> RoutingState:
        return load_state(self.store)

    def transition(self, change: StateChange) -> RoutingState:
        state, etag = _read(self.store)
        return _write(self.store, apply_change(state, change), etag=etag)

    def rollback(
        self,
        *,
        reason: str,
        actor: str,
        evidence: dict[str, Any] | None = None,
        fingerprints: list[str] | None = None,
    ) -> tuple[bool, RoutingState]:
        saved, before = self.persist_rollback(
            reason=reason, actor=actor, evidence=evidence, fingerprints=fingerprints
        )
        if before is not None and self.catalog is not None:
            record_rollback(self.catalog, saved, before=before)
        return before is not None, saved

    def persist_rollback(
        self,
        *,
        reason: str,
        actor: str,
        evidence: dict[str, Any] | None = None,
        fingerprints: list[str] | None = None,
        attempts: int = 8,
    ) -> tuple[RoutingState, RoutingState | None]:
        """The state part of :meth:`rollback`: ``(stored state, state before)``; ``before`` is
        None when there was nothing to roll back (nothing written).

        Raises:
            StateConflict: the state kept changing under us for ``attempts`` tries.
        """
        for attempt in range(attempts):
            state, etag = _read(self.store)
            new = apply_rollback(
                state, reason=reason, actor=actor, evidence=evidence, fingerprints=fingerprints
            )
            if new is None:
                return state, None
            try:
                return _write(self.store, new, etag=etag), state
            except StateConflict:
                time.sleep(0.01 * (attempt + 1))
        raise StateConflict(f"{STATE_KEY} kept changing; rollback not written after {attempts}")


class GatewayRouting:
    """The gateway's admin API (bearer token): the gateway applies each change in memory at
    once and persists it through :class:`StoreRouting`."""

    name = "gateway"

    def __init__(self, url: str, token: str, *, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        self.timeout_s = timeout_s

    @classmethod
    def from_settings(cls, settings: Settings, url: str | None = None) -> GatewayRouting | None:
        """The admin client for ``url`` (default ``FLYWHEEL_GATEWAY__URL``); None when no URL.

        Raises:
            ConfigError: a URL is set but no admin token.
        """
        url = url or settings.gateway.url
        if not url:
            return None
        token = settings.gateway.admin_token
        if token is None or not token.get_secret_value():
            raise ConfigError(
                "FLYWHEEL_GATEWAY__URL is set but FLYWHEEL_GATEWAY__ADMIN_TOKEN is not: "
                "the gateway's admin API needs the token"
            )
        return cls(url, token.get_secret_value())

    def load(self) -> RoutingState:
        return RoutingState.model_validate(self._call("GET", "/admin/state"))

    def transition(self, change: StateChange) -> RoutingState:
        body = change.model_dump(mode="json", exclude_unset=True)
        return RoutingState.model_validate(self._call("POST", "/admin/state", body))

    def rollback(
        self,
        *,
        reason: str,
        actor: str,
        evidence: dict[str, Any] | None = None,
        fingerprints: list[str] | None = None,
    ) -> tuple[bool, RoutingState]:
        body = {"reason": reason[:2000], "actor": actor, "evidence": evidence or {}}
        data = self._call("POST", "/admin/rollback", body)
        return bool(data["rolled_back"]), RoutingState.model_validate(data["state"])

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON answer; errors translated (see :class:`RoutingBackend`).

        Raises:
            GatewayUnavailable: no answer, or a 5xx (retriable).
            ConfigError: the token was refused.
        """
        try:
            resp = httpx.request(
                method, self.url + path, json=body, headers=self._headers, timeout=self.timeout_s
            )
        except httpx.HTTPError as exc:
            raise GatewayUnavailable(
                f"gateway admin API unreachable: {type(exc).__name__}"
            ) from exc
        if resp.status_code in (401, 403):
            raise ConfigError("the gateway refused the admin token (FLYWHEEL_GATEWAY__ADMIN_TOKEN)")
        if resp.status_code == 409:
            detail = resp.json().get("detail") or {}
            message = str(detail.get("message", detail)) if isinstance(detail, dict) else detail
            if isinstance(detail, dict) and detail.get("conflict") == "rejected":
                raise RejectedVersion(message)
            raise StateConflict(f"gateway admin API {path}: {message}")
        if resp.status_code >= 500:
            raise GatewayUnavailable(f"gateway admin API {path}: HTTP {resp.status_code}")
        if resp.status_code >= 400:
            raise ReleaseError(f"gateway admin API {path}: HTTP {resp.status_code} {resp.text}")
        return resp.json()


def open_routing(
    settings: Settings,
    store: ObjectStore,
    *,
    catalog: Catalog | None = None,
    gateway_url: str | None = None,
) -> RoutingBackend:
    """The gateway's admin API when a gateway URL is configured (``gateway_url`` or
    ``FLYWHEEL_GATEWAY__URL``), else the state object in ``store``.

    Raises:
        ConfigError: a gateway URL is set but no admin token.
    """
    gateway = GatewayRouting.from_settings(settings, gateway_url)
    return gateway if gateway is not None else StoreRouting(store, catalog=catalog)


# ---- the rollback audit event ---------------------------------------------------------------


def record_rollback(catalog: Catalog, saved: RoutingState, *, before: RoutingState) -> bool:
    """Append the ``rollback`` audit event for the last transition of ``saved`` (best effort:
    False, logged, when it could not be written)."""
    from infra.audit import record_event

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
    event = record_event(
        catalog,
        event_type="rollback",
        actor=last.actor,
        subject=last.candidate or "",
        details=details,
        at=last.at,
        best_effort=True,
    )
    return event is not None


def _now() -> datetime:
    return datetime.now(UTC)
