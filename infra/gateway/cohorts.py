"""Which version answers a request: sticky canary buckets, shadow sampling, state reloading.

A request's key (:func:`infra.gateway.requester.request_key`: its user, else its session,
else its client's address) hashes to a bucket 0..9999 salted with the candidate's name and
keyed with the deployment's secret (:func:`~infra.gateway.requester.routing_secret`, so no
client can compute which ids land in the canary); buckets below ``weight * 100`` go to the
candidate. Raising the weight only adds buckets, so a user who reached the candidate stays on
it for the whole release, and a new candidate draws a fresh cohort. The voice ledger counts
requests by the same key, so whoever is one voice is also routed as one. Only a request with no
key at all (no user, session or client address) is routed at random.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from infra.errors import ObjectNotFound
from infra.gateway.aio import run_in_daemon_thread
from infra.gateway.ids import random_hex
from infra.keys import STATE_KEY
from infra.routing import RoutingState, parse_state
from infra.store import ObjectStore

log = logging.getLogger(__name__)

BUCKETS = 10_000
ROUTED_MODEL = "flywheel"

Route = Literal["stable", "canary", "pinned"]


def bucket(key: str, *, salt: str = "", secret: bytes | None = None) -> int:
    """A stable bucket 0..9999 for a request's key; ``secret``: the deployment's bucket key
    (without it, the unkeyed hash anyone can compute)."""
    digest = hashlib.blake2b(f"{salt}\x00{key}".encode(), digest_size=8, key=secret or b"")
    return int.from_bytes(digest.digest(), "big") % BUCKETS


@dataclass(frozen=True)
class Decision:
    """Where one request goes: the version that answers, how it got there, and whether the
    candidate also gets a shadow copy."""

    version: str
    route: Route
    shadow_version: str | None = None


def decide(
    state: RoutingState,
    *,
    model: str,
    sticky_key: str | None,
    rand: Callable[[], float] = random.random,
    secret: bytes | None = None,
) -> Decision:
    """Route one request. ``model`` is ``flywheel`` (routed) or an explicit version (pinned);
    ``sticky_key``: the request's key (:func:`~infra.gateway.requester.request_key`);
    ``secret``: the bucket hash's key."""
    if model and model != ROUTED_MODEL:
        return Decision(version=model, route="pinned")
    cand = state.routable_candidate()
    if cand is None:
        return Decision(version=state.stable, route="stable")
    key = sticky_key if sticky_key else random_hex()
    if state.weight > 0 and bucket(key, salt=cand, secret=secret) < state.weight * (BUCKETS / 100):
        return Decision(version=cand, route="canary")
    shadow = cand if state.shadow_fraction > 0 and rand() < state.shadow_fraction else None
    return Decision(version=state.stable, route="stable", shadow_version=shadow)


class StateWatcher:
    """Holds the current routing state and re-reads ``deploy/state.json`` at most every
    ``interval_s`` (skipping the parse when the bytes did not change). A state set locally by
    the rollback fast path wins over older stored revisions until it has been persisted, and a
    read begun before a state was set here is dropped (it may hold the state that set replaced;
    the next read tells)."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        interval_s: float = 0.5,
        on_change: Callable[[RoutingState], None] | None = None,
    ) -> None:
        self.store = store
        self.interval_s = interval_s
        self.on_change = on_change
        self._state = RoutingState()
        self._views: tuple[RoutingState, dict[str, RoutingState]] = (self._state, {})
        self._raw: bytes | None = None
        self._pending: RoutingState | None = None
        self._sets = 0  # states set here so far: a read begun before the last one is stale
        self._last_error = 0.0

    @property
    def state(self) -> RoutingState:
        """The routing state in use now."""
        return self._state

    def view(self, workload: str | None) -> RoutingState:
        """How ``workload``'s requests are routed now (:meth:`RoutingState.for_workload`),
        built once per state."""
        state = self._state
        if workload is None or workload not in state.workloads:
            return state
        of, views = self._views
        if of is not state:  # the views of an older state are dropped with it
            views = {}
            self._views = (state, views)
        view = views.get(workload)
        if view is None:
            view = views[workload] = state.for_workload(workload)
        return view

    def set_local(self, state: RoutingState, *, persisted: bool) -> None:
        """Use ``state`` now (rollback fast path); keep it over older stored revisions until the
        store holds it (``persisted=True``)."""
        self._pending = None if persisted else state
        self._sets += 1
        self._set(state)

    def refresh(self) -> bool:
        """Read the store once (blocking); True if the state changed."""
        sets = self._sets
        return self._apply(self._read(), read_after=sets)

    async def run(self) -> None:
        """Poll the store forever (cancel to stop); only the read runs in a thread."""
        while True:
            sets = self._sets
            raw = await run_in_daemon_thread(self._read)
            self._apply(raw, read_after=sets)
            await asyncio.sleep(self.interval_s)

    def _read(self) -> bytes | None:
        try:
            return self.store.get(STATE_KEY)
        except ObjectNotFound:
            return None
        except Exception as exc:  # noqa: BLE001 - keep routing on the last good state
            self._log_error(f"cannot read {STATE_KEY}: {exc}")
            return None

    def _apply(self, raw: bytes | None, *, read_after: int) -> bool:
        """Use the state in ``raw``, read when ``read_after`` states had been set here."""
        if raw is None or raw == self._raw or read_after != self._sets:
            return False
        try:
            state = parse_state(raw)
        except Exception as exc:  # noqa: BLE001
            self._log_error(str(exc))
            return False
        self._raw = raw
        if self._pending is not None:
            if state.revision < self._pending.revision:
                return False
            self._pending = None
        self._set(state)
        return True

    def _set(self, state: RoutingState) -> None:
        changed = state != self._state
        self._state = state
        if changed and self.on_change is not None:
            self.on_change(state)

    def _log_error(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_error > 30:
            log.warning("routing state: %s (keeping the last good state)", message)
            self._last_error = now
