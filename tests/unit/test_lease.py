"""Named leases (issue 52, item 6): the erasure lease is the table lease's readers/writer lock
under another key, independent of it, and a holder renews its entry while it holds it, so a
hold longer than the TTL (a curate run, a forget-user waiting on Langfuse) is kept, while a
crashed holder's entry still expires."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from infra.lease import ERASURE_LEASE, TABLES_LEASE, Lease, LeaseBusy
from infra.store import LocalStore

WAIT_S = 60  # a bound for a stalled machine, never a measurement


def test_the_erasure_lease_is_independent_of_the_table_lease(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    erasure = Lease(store, ERASURE_LEASE, wait_s=0, poll_s=0.01)
    tables = Lease(store, TABLES_LEASE, wait_s=0, poll_s=0.01)
    with erasure.exclusive():
        with tables.shared():  # a forget-user's own commits
            pass
        with pytest.raises(LeaseBusy, match="erasure lease"), erasure.shared():
            pass


def test_a_hold_longer_than_the_ttl_is_renewed(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    lease = Lease(store, ERASURE_LEASE, ttl_s=0.3, wait_s=0, poll_s=0.01)
    with lease.exclusive():
        taken = json.loads(store.get(ERASURE_LEASE))["exclusive"]["expires"]
        deadline = time.monotonic() + WAIT_S
        while json.loads(store.get(ERASURE_LEASE))["exclusive"]["expires"] <= taken + 0.3:
            assert time.monotonic() < deadline, "the hold was never renewed"
            time.sleep(0.05)
        with (
            pytest.raises(LeaseBusy),  # past its first TTL, still held
            Lease(store, ERASURE_LEASE, wait_s=0).shared(),
        ):
            pass
    with Lease(store, ERASURE_LEASE, wait_s=0).shared():  # and released at the end
        pass


def test_a_crashed_holders_entry_expires(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    entry = {"shared": {}, "exclusive": {"id": "crashed", "expires": time.time() - 1}}
    store.put(ERASURE_LEASE, json.dumps(entry).encode())
    with Lease(store, ERASURE_LEASE, wait_s=0).shared():
        pass
