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

Every change is one compare-and-swap (:func:`~infra.cas.compare_and_swap`) and names
the release it is about (``release_id``, the version): a decision about another release than
the current one changes nothing. Each workload may have its own release
(:class:`WorkloadRelease`); :func:`scoped` gives the backend for one workload's release. A rollback writes the state first and its ``rollback`` audit
event after (:mod:`infra.routing.events`); an audit failure is logged and never blocks it.
"""

from infra.cas import compare_and_swap
from infra.routing.admin_api import GatewayRouting
from infra.routing.backend import RoutingBackend, open_routing
from infra.routing.events import decision_details, record_decision, record_rollback, record_stale
from infra.routing.state import (
    MAX_FINGERPRINTS,
    Phase,
    Rollback,
    RoutingState,
    StateChange,
    Transition,
    WorkloadRelease,
    apply_change,
    apply_rollback,
    bake_target,
    fingerprint_key,
    new_release_id,
    parse_state,
    record_transition,
    stale_reason,
)
from infra.routing.store import StoreRouting, load_state, save_state
from infra.routing.workloads import WorkloadRouting, scoped

__all__ = [
    "MAX_FINGERPRINTS",
    "GatewayRouting",
    "Phase",
    "Rollback",
    "RoutingBackend",
    "RoutingState",
    "StateChange",
    "StoreRouting",
    "Transition",
    "WorkloadRelease",
    "WorkloadRouting",
    "apply_change",
    "apply_rollback",
    "bake_target",
    "compare_and_swap",
    "decision_details",
    "fingerprint_key",
    "load_state",
    "new_release_id",
    "open_routing",
    "parse_state",
    "record_decision",
    "record_rollback",
    "record_stale",
    "record_transition",
    "save_state",
    "scoped",
    "stale_reason",
]
