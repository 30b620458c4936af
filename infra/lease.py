"""The table lease: a store-level readers/writer lock that every Iceberg commit takes shared and
orphan-file removal takes exclusive, so removal never deletes the data file of a commit in
flight (a commit writes its data files first and references them only when it commits).

The lease is one JSON object beside the tables (``_locks/tables.lease`` under the warehouse),
changed only by compare-and-swap (:func:`infra.cas.compare_and_swap` over
:meth:`ObjectStore.put_if`: S3 ``If-Match`` / ``If-None-Match``, a ``flock`` locally), so it
holds across processes and machines. Every entry expires (a crashed holder blocks nobody for
longer than ``ttl_s``).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from infra.cas import AT_ONCE, compare_and_swap
from infra.errors import ObjectNotFound, PreconditionFailed, TransientStoreError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.store import ObjectStore

log = logging.getLogger(__name__)

LEASE_KEY = "_locks/tables.lease"


class LeaseBusy(TransientStoreError):
    """The lease is held in the other mode past the wait; retry later."""


class TableLease:
    """Shared (commits) and exclusive (orphan removal) holds on one lease object."""

    def __init__(
        self, store: ObjectStore, *, ttl_s: float = 900, wait_s: float = 120, poll_s: float = 0.2
    ) -> None:
        self.store, self.ttl_s, self.wait_s, self.poll_s = store, ttl_s, wait_s, poll_s

    def _read(self) -> tuple[dict[str, Any], str | None]:
        try:
            data, etag = self.store.get_versioned(LEASE_KEY)
        except ObjectNotFound:
            return {"shared": {}, "exclusive": None}, None
        state = json.loads(data)
        now = time.time()
        state["shared"] = {k: v for k, v in state.get("shared", {}).items() if v > now}
        if state.get("exclusive") and state["exclusive"]["expires"] <= now:
            state["exclusive"] = None
        return state, etag

    def _change(self, update: Any, *, mode: str) -> None:
        """Apply ``update(state) -> bool`` (False: must wait) by compare-and-swap."""
        deadline = time.monotonic() + self.wait_s

        def decide(found: tuple[dict[str, Any], str | None]) -> dict[str, Any] | None:
            return found[0] if update(found[0]) else None

        def write(found: tuple[dict[str, Any], str | None], state: dict[str, Any]) -> bool:
            self.store.put_if(LEASE_KEY, json.dumps(state).encode(), etag=found[1])
            return True

        while True:
            try:
                (state, _etag), written = compare_and_swap(
                    self._read,
                    decide,
                    write,
                    operation="lease.change",
                    policy=AT_ONCE,
                    retry_on=(PreconditionFailed,),
                )
            except PreconditionFailed:
                continue  # others kept changing the lease: read it again
            if written:
                return
            if time.monotonic() > deadline:
                holders = len(state["shared"]) if mode == "exclusive" else 1
                raise LeaseBusy(
                    f"the table lease is held ({holders} holder(s) in the other mode) after "
                    f"{self.wait_s:.0f} s; retry later"
                )
            time.sleep(self.poll_s)

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Held around one commit (many at once; waits while orphan removal runs)."""
        me = uuid.uuid4().hex

        def take(state: dict[str, Any]) -> bool:
            if state["exclusive"]:
                return False
            state["shared"][me] = time.time() + self.ttl_s
            return True

        self._change(take, mode="shared")
        try:
            yield
        finally:
            self._change(lambda s: s["shared"].pop(me, None) is not None or True, mode="shared")

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held around orphan removal (alone; waits for commits in flight to finish)."""
        me = uuid.uuid4().hex

        def take(state: dict[str, Any]) -> bool:
            if state["exclusive"] or state["shared"]:
                return False
            state["exclusive"] = {"id": me, "expires": time.time() + self.ttl_s}
            return True

        self._change(take, mode="exclusive")
        try:
            yield
        finally:

            def release(state: dict[str, Any]) -> bool:
                if state["exclusive"] and state["exclusive"]["id"] == me:
                    state["exclusive"] = None
                return True

            self._change(release, mode="exclusive")


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


def table_lease(catalog: Catalog) -> TableLease:
    """The lease of the catalog's warehouse."""
    return TableLease(warehouse_store(catalog))
