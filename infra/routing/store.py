"""The routing state as an object in the store, changed by compare-and-swap: the stored
revision must still be the one read, and the write is one atomic conditional write
(:meth:`infra.store.ObjectStore.put_if`: ``If-Match`` on S3, an exclusive lock locally), so a
writer holding a stale copy (a canary step) can never undo a rollback written meanwhile."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Unpack

from infra.cas import CONFLICTS, compare_and_swap
from infra.errors import ObjectNotFound, PreconditionFailed, ReleaseError, StateConflict
from infra.keys import STATE_KEY
from infra.retries import Backoff
from infra.routing.events import record_rollback
from infra.routing.state import RoutingState, apply_change, apply_rollback, parse_state

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.routing.state import Rollback, StateChange
    from infra.store import ObjectStore

BAKE_S = 600.0  # FLYWHEEL_MODEL_SERVER__BAKE_S's default; open_routing passes the setting


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
        ReleaseError: ``state`` is one workload's view, not the whole state.
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
    if state.workload is not None:  # a view would overwrite every other workload's release
        raise ReleaseError(f"workload {state.workload}'s view is not a whole routing state")
    return state.model_copy(update={"revision": state.revision + 1, "updated_at": _now()})


def _now() -> datetime:
    return datetime.now(UTC)


class StoreRouting:
    """The routing state in the object store, changed by atomic compare-and-swap. ``bake_s``:
    how long after a promotion a rollback still returns to the previous stable version."""

    name = "store"

    def __init__(
        self, store: ObjectStore, *, catalog: Catalog | None = None, bake_s: float = BAKE_S
    ) -> None:
        self.store = store
        self.catalog = catalog  # where rollbacks write their audit event (None: nowhere)
        self.bake_s = bake_s

    def load(self) -> RoutingState:
        """The stored routing state."""
        return load_state(self.store)

    def transition(self, change: StateChange) -> RoutingState:
        """Apply ``change`` with one conditional write (see :class:`RoutingBackend`)."""
        state, etag = _read(self.store)
        return _write(self.store, apply_change(state, change), etag=etag)

    def rollback(self, **rollback: Unpack[Rollback]) -> tuple[bool, RoutingState]:
        """Roll back (see :class:`RoutingBackend`), then write the ``rollback`` audit event."""
        saved, before = self.persist_rollback(**rollback)
        if before is not None and self.catalog is not None:
            workload = rollback.get("workload")
            record_rollback(self.catalog, saved, before=before, workload=workload)
        return before is not None, saved

    def persist_rollback(
        self,
        *,
        policy: Backoff = CONFLICTS,
        retry_on: tuple[type[BaseException], ...] = (StateConflict,),
        **rollback: Unpack[Rollback],
    ) -> tuple[RoutingState, RoutingState | None]:
        """The state part of :meth:`rollback` (its :class:`Rollback` keywords), one
        compare-and-swap retried on ``retry_on`` under ``policy``: ``(stored state, state
        before)``; ``before`` is None when there was nothing to roll back (nothing written).

        Raises:
            ReleaseInterrupted: the rollback names another release than the current one.
            StateConflict: the state kept changing under us for ``policy.attempts`` tries.
        """
        found, saved = compare_and_swap(
            lambda: _read(self.store),
            lambda found: apply_rollback(found[0], bake_s=self.bake_s, **rollback),
            lambda found, new: _write(self.store, new, etag=found[1]),
            operation="routing.rollback",
            policy=policy,
            retry_on=retry_on,
        )
        if saved is None:
            return found[0], None
        return saved, found[0]
