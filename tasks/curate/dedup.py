"""Dedup across windows: a bounded index of the (conversation + answer) hashes curate kept
recently, ``curate/dedup/index.parquet`` (hashes and window ids only, never text).

Curating window ``W`` reads the index (one small object, not a scan of the table), drops the
entries older than ``horizon_days`` before ``W``, skips rows whose hash an *other* window kept,
and writes back the index with ``W``'s entries replaced by what ``W`` keeps now, so rerunning
the same window stays idempotent while the same conversation and answer an hour later adds
nothing. The write is a compare-and-swap (:func:`infra.cas.compare_and_swap` over ``put_if``),
retried when another window's curate wrote in between.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task

from infra.cas import AT_ONCE, compare_and_swap
from infra.errors import ObjectNotFound, PreconditionFailed
from infra.keys import DEDUP_INDEX_KEY, parse_window_start, window_id
from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from infra.store import ObjectStore

INDEX_SCHEMA = pa.schema([("key", pa.string()), ("window", pa.string())])


def _read(store: ObjectStore) -> tuple[dict[str, str], str | None]:
    try:
        data, etag = store.get_versioned(DEDUP_INDEX_KEY)
    except ObjectNotFound:
        return {}, None
    table = pq.read_table(io.BytesIO(data))
    keys, windows = table.column("key").to_pylist(), table.column("window").to_pylist()
    return dict(zip(keys, windows, strict=True)), etag


def _horizon(window: str, horizon_days: int) -> str:
    return window_id(parse_window_start(window) - timedelta(days=horizon_days))


def seen_before(store: ObjectStore, *, window: str, horizon_days: int) -> set[str]:
    """Hashes kept by other windows within ``horizon_days`` before ``window`` (or after it)."""
    index, _etag = _read(store)
    oldest = _horizon(window, horizon_days)
    return {k for k, w in index.items() if w != window and w >= oldest}


def record_kept(store: ObjectStore, *, window: str, keys: list[str], horizon_days: int) -> int:
    """Replace ``window``'s entries of the index with ``keys`` and drop expired ones; returns
    the index size. Raises PreconditionFailed when other writers kept winning the swap."""
    oldest = _horizon(window, horizon_days)

    def decide(found: tuple[dict[str, str], str | None]) -> dict[str, str]:
        kept = {k: w for k, w in found[0].items() if w != window and w >= oldest}
        for key in keys:
            kept.setdefault(key, window)
        return kept

    def write(found: tuple[dict[str, str], str | None], kept: dict[str, str]) -> int:
        table = pa.Table.from_pydict(
            {"key": list(kept), "window": list(kept.values())}, schema=INDEX_SCHEMA
        )
        sink = io.BytesIO()
        pq.write_table(table, sink)
        store.put_if(DEDUP_INDEX_KEY, sink.getvalue(), etag=found[1])
        return len(kept)

    try:
        _found, size = compare_and_swap(
            lambda: _read(store),
            decide,
            write,
            operation="curate.dedup_index",
            policy=AT_ONCE,
            retry_on=(PreconditionFailed,),
        )
    except PreconditionFailed as exc:
        raise PreconditionFailed(
            f"{DEDUP_INDEX_KEY} kept changing under {AT_ONCE.attempts} writes"
        ) from exc
    return size or 0  # decide always writes


seen_before_task = task(**IO_RETRIES)(seen_before)
record_kept_task = task(**IO_RETRIES)(record_kept)
