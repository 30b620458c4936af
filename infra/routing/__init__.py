"""The routing state (``deploy/state.json``) and the one interface that changes it.

The state says which version is stable, which is the candidate, at what weight and shadow
fraction, in which release phase, plus the history of transitions. Every write is a
compare-and-swap on ``revision``, so a writer holding a stale copy (a canary step) can never
undo a rollback written meanwhile (the gateway's alert fast path).

:class:`RoutingBackend` has two implementations, picked by :func:`open_routing`:

- :class:`StoreRouting`: the state object in the object store, written with a truly atomic
  conditional write (:meth:`infra.store.ObjectStore.put_if`); the gateway persists through it.
- :class:`GatewayRouting`: the gateway's admin API on its admin listener
  (``GET/POST /admin/state``, ``POST /admin/rollback``), used whenever a gateway URL is
  configured (``FLYWHEEL_GATEWAY__ADMIN_URL``, or ``FLYWHEEL_GATEWAY__URL``'s host at
  ``FLYWHEEL_GATEWAY__ADMIN_PORT``), so that the gateway applies every change at once.

A rollback writes the state first and its ``rollback`` audit event after; an audit failure is
logged and never blocks the rollback.
"""

from infra.routing.backend import RoutingBackend, open_routing
from infra.routing.gateway import GatewayRouting
from infra.routing.state import (
    MAX_FINGERPRINTS,
    Phase,
    RoutingState,
    StateChange,
    Transition,
    apply_change,
    apply_rollback,
    parse_state,
    record_transition,
)
from infra.routing.store import StoreRouting, load_state, record_rollback, save_state

__all__ = [
    "MAX_FINGERPRINTS",
    "GatewayRouting",
    "Phase",
    "RoutingBackend",
    "RoutingState",
    "StateChange",
    "StoreRouting",
    "Transition",
    "apply_change",
    "apply_rollback",
    "load_state",
    "open_routing",
    "parse_state",
    "record_rollback",
    "record_transition",
    "save_state",
]
