"""Named leases: store-level readers/writer locks held across processes and machines.

A lease is one JSON object (its key names it), changed only by compare-and-swap
(:func:`infra.cas.compare_and_swap` over :meth:`ObjectStore.put_if`: S3 ``If-Match`` /
``If-None-Match``, a ``flock`` locally). Two are in use:

- the *table lease* (:data:`TABLES_LEASE`, beside the tables under the warehouse): every
  Iceberg commit takes it shared and orphan-file removal exclusive, so removal never deletes the
  data file of a commit in flight (a commit writes its data files first and references them
  only when it commits);
- the *erasure lease* (:data:`ERASURE_LEASE`, in the flywheel store): ``forget-user`` and
  ``retention`` take it exclusive, the writers they race with shared (curate from its
  k-anonymity step's reads to its last write), so a writer never writes back what it read
  before an erasure (:func:`erasure_lease`).

Every entry expires ``ttl_s`` after it was last renewed: a holder renews its entry every
``ttl_s / 3`` from a background thread while it holds the lease, so a long hold (a curate run,
a forget-user that waits for Langfuse) keeps it, and a crashed holder blocks nobody for longer
than ``ttl_s``. Leases nest in one order only: the erasure lease outside the table lease.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from infra.cas import AT_ONCE, compare_and_swap
from infra.errors import ObjectNotFound, PreconditionFailed, TransientStoreError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

TABLES_LEASE = "_locks/tables.lease"
ERASURE_LEASE = "_locks/erasure.lease"

State = dict[str, Any]


class LeaseBusy(TransientStoreError):
    """The lease is held in the other mode past the wait; retry later."""


class Lease:
    """Shared and exclusive holds on the lease object at ``key`` of ``store``."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        *,
        ttl_s: float = 900,
        wait_s: float = 120,
        poll_s: float = 0.2,
    ) -> None:
        self.store, self.key = store, key
        self.ttl_s, self.wait_s, self.poll_s = ttl_s, wait_s, poll_s

    @property
    def name(self) -> str:
        """The lease's name in messages (``erasure``, ``tables``)."""
        return self.key.rsplit("/", 1)[-1].removesuffix(".lease")

    def _read(self) -> tuple[State, str | None]:
        try:
            data, etag = self.store.get_versioned(self.key)
        except ObjectNotFound:
            return {"shared": {}, "exclusive": None}, None
        state = json.loads(data)
        now = time.time()
        state["shared"] = {k: v for k, v in state.get("shared", {}).items() if v > now}
        if state.get("exclusive") and state["exclusive"]["expires"] <= now:
            state["exclusive"] = None
        return state, etag

    def _change(self, update: Callable[[State], bool], *, mode: str, wait: bool = True) -> bool:
        """Apply ``update(state) -> bool`` (False: must wait) by compare-and-swap; returns
        False when ``wait`` is off and the update had to wait."""
        deadline = time.monotonic() + self.wait_s

        def decide(found: tuple[State, str | None]) -> State | None:
            return found[0] if update(found[0]) else None

        def write(found: tuple[State, str | None], state: State) -> bool:
            self.store.put_if(self.key, json.dumps(state).encode(), etag=found[1])
            return True

        while True:
            try:
                (state, _etag), written = compare_and_swap(
                    self._read,
                    decide,
                    write,
                    operation=f"lease.{self.name}",
                    policy=AT_ONCE,
                    retry_on=(PreconditionFailed,),
                )
            except PreconditionFailed:
                continue  # others kept changing the lease: read it again
            if written or not wait:
                return bool(written)
            if time.monotonic() > deadline:
                holders = len(state["shared"]) if mode == "exclusive" else 1
                raise LeaseBusy(
                    f"the {self.name} lease is held ({holders} holder(s) in the other mode) "
                    f"after {self.wait_s:.0f} s; retry later"
                )
            time.sleep(self.poll_s)

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Held by many at once; waits while an exclusive hold lasts."""
        me = uuid.uuid4().hex

        def take(state: State) -> bool:
            if state["exclusive"]:
                return False
            state["shared"][me] = time.time() + self.ttl_s
            return True

        def renew(state: State) -> bool:
            if me not in state["shared"]:
                return False  # expired (a stalled holder): never taken back behind a writer
            state["shared"][me] = time.time() + self.ttl_s
            return True

        self._change(take, mode="shared")
        try:
            with self._renewing(renew):
                yield
        finally:
            self._change(lambda s: s["shared"].pop(me, None) is not None or True, mode="shared")

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held alone; waits for the shared holds in flight to end. Shared holds are still
        granted while it waits (no writer preference), so a steady stream of them can delay
        it up to ``wait_s``."""
        me = uuid.uuid4().hex

        def take(state: State) -> bool:
            if state["exclusive"] or state["shared"]:
                return False
            state["exclusive"] = {"id": me, "expires": time.time() + self.ttl_s}
            return True

        def renew(state: State) -> bool:
            if not (state["exclusive"] and state["exclusive"]["id"] == me):
                return False
            state["exclusive"]["expires"] = time.time() + self.ttl_s
            return True

        def release(state: State) -> bool:
            if state["exclusive"] and state["exclusive"]["id"] == me:
                state["exclusive"] = None
            return True

        self._change(take, mode="exclusive")
        try:
            with self._renewing(renew):
                yield
        finally:
            self._change(release, mode="exclusive")

    @contextmanager
    def _renewing(self, renew: Callable[[State], bool]) -> Iterator[None]:
        """Renew the hold every ``ttl_s / 3`` while the block runs (a daemon thread)."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(self.ttl_s / 3):
                try:
                    if not self._change(renew, mode="renew", wait=False):
                        log.error("the %s lease expired before it was renewed", self.name)
                        return
                except Exception as exc:  # the next tick tries again; the TTL is the margin
                    log.warning("the %s lease was not renewed: %s", self.name, exc)

        thread = threading.Thread(target=loop, name=f"lease-{self.name}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


def warehouse_store(catalog: Catalog) -> ObjectStore:
    """The object store holding the catalog's warehouse (where the lease lives)."""
    props = dict(catalog.properties)
    return _store_for(
        props.get("warehouse", ""),
        props.get("s3.endpoint"),
        props.get("s3.region", "us-east-1"),
        props.get("s3.access-key-id"),
        props.get("s3.secret-access-key"),
    )


@lru_cache(maxsize=8)
def _store_for(
    warehouse: str, endpoint: str | None, region: str, key_id: str | None, secret: str | None
) -> ObjectStore:
    from infra.store import LocalStore, S3Store

    if warehouse.startswith("s3://"):
        return S3Store(
            warehouse,
            endpoint_url=endpoint,
            region=region,
            access_key_id=key_id,
            secret_access_key=secret,
        )
    return LocalStore(warehouse.removeprefix("file://"))


def table_lease(catalog: Catalog) -> Lease:
    """The table lease of the catalog's warehouse."""
    return Lease(warehouse_store(catalog), TABLES_LEASE)


def erasure_lease(store: ObjectStore, settings: Settings) -> Lease:
    """The erasure lease of the flywheel store: ``forget-user`` and ``retention`` hold it
    exclusive, curate's k-anonymity step shared (``FLYWHEEL_ERASURE__LEASE_TTL_S``,
    ``FLYWHEEL_ERASURE__LEASE_WAIT_S``)."""
    cfg = settings.erasure
    return Lease(store, ERASURE_LEASE, ttl_s=cfg.lease_ttl_s, wait_s=cfg.lease_wait_s)
