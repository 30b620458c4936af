"""The routing state as an object in the store, changed by compare-and-swap: the stored
revision must still be the one read, and the write is one atomic conditional write
(:meth:`infra.store.ObjectStore.put_if`: ``If-Match`` on S3, an exclusive lock locally), so a
writer holding a stale copy (a canary step) can never undo a rollback written meanwhile."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from infra.errors import ObjectNotFound, PreconditionFailed, StateConflict
from infra.keys import STATE_KEY
from infra.routing.state import RoutingState, apply_change, apply_rollback, parse_state

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.routing.state import StateChange
    from infra.store import ObjectStore


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


def _now() -> datetime:
    return datetime.now(UTC)


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
