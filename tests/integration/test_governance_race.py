"""Governance cannot corrupt a table (issue 17): orphan removal holds the table lease that
every commit holds shared, and spares young unreferenced files; curate and retention running
at the same time on the S3 server leave every committed row readable."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from infra.catalog import get_table, open_catalog, scan
from infra.lease import TABLES_LEASE, Lease, LeaseBusy
from infra.settings import get_settings
from infra.store import LocalStore, open_store
from tests.data.pii_corpus import plant_window
from tests.procs import s3_server

pytestmark = pytest.mark.integration


def test_exclusive_waits_for_shared_and_shared_waits_for_exclusive(tmp_path) -> None:
    lease = Lease(LocalStore(tmp_path), TABLES_LEASE, wait_s=0.5, poll_s=0.05)
    with lease.shared(), lease.shared(), pytest.raises(LeaseBusy), lease.exclusive():
        pass
    with lease.exclusive(), pytest.raises(LeaseBusy), lease.shared():
        pass
    released = threading.Event()

    def hold() -> None:
        with lease.shared():
            released.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    time.sleep(0.2)
    slow = Lease(LocalStore(tmp_path), TABLES_LEASE, wait_s=10, poll_s=0.05)
    threading.Timer(0.3, released.set).start()
    with slow.exclusive():  # granted once the commit lets go
        assert released.is_set()
    t.join()


def test_young_orphans_stay_old_ones_go(flywheel_home) -> None:
    from tasks.governance.maintenance import expire_and_clean

    settings = get_settings()
    catalog, store = open_catalog(settings), open_store(settings)
    table = get_table(catalog, "audit_log")
    from infra.audit import record_event

    record_event(catalog, event_type="t", actor="t", subject="s", details={})
    base = table.location().removeprefix("file://").rstrip("/")
    young, old = f"{base}/data/young-orphan.parquet", f"{base}/data/old-orphan.parquet"
    for path in (young, old):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(b"not referenced")
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    _, removed = expire_and_clean(catalog, store, ["audit_log"])
    assert removed == 1 and os.path.exists(young) and not os.path.exists(old)
    assert scan(catalog, "audit_log").num_rows == 1


@pytest.mark.slow
def test_curate_and_retention_at_once_on_s3_keep_every_row(prefect_api, flywheel_home, monkeypatch):
    with s3_server("flywheel-race") as endpoint:
        for key, value in {
            "FLYWHEEL_STORE_URL": "s3://flywheel-race/prefix",
            "FLYWHEEL_S3_ENDPOINT_URL": endpoint,
            "FLYWHEEL_S3_ACCESS_KEY_ID": "testing",
            "FLYWHEEL_S3_SECRET_ACCESS_KEY": "testing",
            "FLYWHEEL_CURATE__K_ANONYMITY": "1",
            "FLYWHEEL_ORPHAN_MIN_AGE_HOURS": "0",  # only the lease protects in-flight files
        }.items():
            monkeypatch.setenv(key, value)
        get_settings.cache_clear()
        settings = get_settings()
        store = open_store(settings)
        now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        starts = [now - timedelta(hours=h) for h in (4, 3, 2, 1)]
        for i, start in enumerate(starts):
            items = [(f"What is {i}+{j}?", f"user-{j}") for j in range(8)]
            plant_window(store, start, items, users=8, seed=i)

        from flows.curate import curate
        from flows.governance import retention

        done = threading.Event()
        errors: list[BaseException] = []
        removed: list[int] = []

        def maintain() -> None:
            try:
                while not done.is_set():
                    removed.append(retention(days=30).orphan_files_removed)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        worker = threading.Thread(target=maintain)
        worker.start()
        written = 0
        try:
            for start in starts:
                written += curate(window_start=start).written
                curate(window_start=start)  # a rerun leaves unreferenced files behind
        finally:
            done.set()
            worker.join(timeout=600)
        assert not errors, errors
        assert removed, "retention never ran"
        retention(days=30)  # and once more with nothing in flight
        rows = scan(open_catalog(settings), "training_examples")  # every data file readable
        assert written == rows.num_rows == 4 * 8 * 3
