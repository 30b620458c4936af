"""Physical deletion in Iceberg: expire snapshots, then remove the files no remaining snapshot
references. A file written by an in-flight commit looks like an orphan, so removal holds the
table lease exclusively (every commit holds it shared, :mod:`infra.lease`) and spares
unreferenced files younger than a safe age (default one day) unless a snapshot expiry just
released them (those were committed, so physical erasure does not wait a day)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from prefect import task

from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from infra.store import ObjectStore

log = logging.getLogger(__name__)


def store_key(store: ObjectStore, uri: str) -> str | None:
    """The store key of a file URI, or None when it lies outside the store."""
    base = store.url.rstrip("/")
    for prefix in (f"file://{base}/", f"{base}/"):
        if uri.startswith(prefix):
            return uri[len(prefix) :]
    return None


def referenced_files(table: Table) -> set[str]:
    """Every file the table's remaining snapshots need (metadata, manifests, data)."""
    refs = {table.metadata_location}
    for snap in table.metadata.snapshots:
        refs.add(snap.manifest_list)
        for manifest in snap.manifests(table.io):
            refs.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                refs.add(entry.data_file.file_path)
    refs |= {s.statistics_path for s in table.metadata.statistics}
    refs |= {s.statistics_path for s in table.metadata.partition_statistics}
    return refs


def expire_and_clean(
    catalog: Catalog,
    store: ObjectStore,
    names: list[str],
    *,
    older_than: datetime | None = None,
    min_orphan_age: timedelta = timedelta(days=1),
) -> tuple[int, int]:
    """Expire the tables' snapshots (all but the current one, or those older than
    ``older_than``) and remove files no remaining snapshot references and older than
    ``min_orphan_age``, holding the table lease exclusively (commits in flight finish first;
    :class:`~infra.lease.LeaseBusy`, retried by the task, when they do not in time); returns
    (snapshots expired, files removed)."""
    from infra.catalog import get_table
    from infra.lease import table_lease

    expired = removed = 0
    released: set[str] = set()  # files only the expired snapshots referenced: committed, not
    for name in names:  # in flight, so they go now whatever their age (erasure is physical)
        table = get_table(catalog, name)
        protected = {ref.snapshot_id for ref in table.metadata.refs.values()}
        limit = older_than.timestamp() * 1000 if older_than else None
        ids = [
            s.snapshot_id
            for s in table.metadata.snapshots
            if s.snapshot_id not in protected and (limit is None or s.timestamp_ms < limit)
        ]
        if ids:
            before = referenced_files(table)
            table.maintenance.expire_snapshots().by_ids(ids).commit()
            released |= before - referenced_files(get_table(catalog, name))
            expired += len(ids)
    released_keys = {k for uri in released if (k := store_key(store, uri))}
    with table_lease(catalog).exclusive():
        for name in names:  # the references are read under the lease: no commit can add any
            removed += remove_orphans(
                get_table(catalog, name), store, min_age=min_orphan_age, released=released_keys
            )
    return expired, removed


def remove_orphans(
    table: Table, store: ObjectStore, *, min_age: timedelta, released: set[str] | None = None
) -> int:
    """Delete files under the table's location that no remaining snapshot references and that
    are older than ``min_age`` (a younger one may belong to a commit being written) or were
    ``released`` by a snapshot expiry just now."""
    prefix = store_key(store, table.location())
    if prefix is None:
        log.warning("table %s is outside the object store; orphan files not removed", table.name())
        return 0
    listing = getattr(store, "list_modified", None)
    if listing is None:
        log.warning("the store cannot tell file ages; orphan files of %s not removed", table.name())
        return 0
    live = {k for uri in referenced_files(table) if (k := store_key(store, uri))}
    cutoff = datetime.now(UTC) - min_age
    removed = 0
    for obj, modified in listing(prefix.rstrip("/") + "/"):
        if obj in live or obj.endswith("version-hint.text"):
            continue
        if modified > cutoff and obj not in (released or set()):
            continue
        store.delete(obj)
        removed += 1
    return removed


@task(**IO_RETRIES)
def expire_task(
    catalog: Catalog,
    store: ObjectStore,
    names: list[str],
    older_than: datetime | None,
    min_orphan_age_s: float = 86400,
) -> tuple[int, int]:
    """Returns (snapshots expired, unreferenced files removed)."""
    return expire_and_clean(
        catalog,
        store,
        names,
        older_than=older_than,
        min_orphan_age=timedelta(seconds=min_orphan_age_s),
    )
