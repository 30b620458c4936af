"""The component cache: ``scores/cache/<namespace>/<h>.parquet``, 16 shards by the first hex
digit ``h`` of the content key (:func:`tasks.reward.components.content_key`: sha256 of
namespace, question, contexts, answer, reference). Rows hold the key and the three
content-dependent components (NaN = computed, not applicable); no text, so the cache holds no
personal data. Failed components are not cached."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from infra.errors import ObjectNotFound
from infra.keys import cache_shard_key
from tasks.reward.components import CACHED

if TYPE_CHECKING:
    from collections.abc import Iterable

    from infra.store import ObjectStore

CACHE_SCHEMA = pa.schema([("key", pa.string()), *[(c, pa.float64()) for c in CACHED]])


class ComponentCache:
    """Content-dependent components by content key (float, or NaN = not applicable)."""

    def __init__(self, entries: dict[str, dict[str, float]] | None = None) -> None:
        self.entries: dict[str, dict[str, float]] = entries or {}
        self.dirty: set[str] = set()

    def get(self, key: str) -> dict[str, float]:
        """The cached components of ``key``, if any."""
        return self.entries.get(key, {})

    def update(self, key: str, values: dict[str, float]) -> None:
        """Remember ``components`` for ``key``."""
        if values:
            self.entries.setdefault(key, {}).update(values)
            self.dirty.add(key)


def load_cache(store: ObjectStore, *, namespace: str, keys: Iterable[str]) -> ComponentCache:
    """The cache shards that hold ``keys`` (each shard read whole, so saving keeps it whole)."""
    entries: dict[str, dict[str, float]] = {}
    for shard in sorted({k[0] for k in keys}):
        try:
            table = pq.read_table(io.BytesIO(store.get(cache_shard_key(namespace, shard))))
        except ObjectNotFound:
            continue
        columns = {c: table.column(c).to_pylist() for c in CACHED}
        for i, key in enumerate(table.column("key").to_pylist()):
            entries[key] = {c: columns[c][i] for c in CACHED if columns[c][i] is not None}
    return ComponentCache(entries)


def save_cache(store: ObjectStore, *, namespace: str, cache: ComponentCache) -> int:
    """Rewrite the shards that gained entries; returns how many shards were written."""
    shards = sorted({k[0] for k in cache.dirty})
    for shard in shards:
        keys = sorted(k for k in cache.entries if k[0] == shard)
        data: dict[str, list[Any]] = {"key": keys}
        for c in CACHED:
            data[c] = [cache.entries[k].get(c) for k in keys]
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pydict(data, schema=CACHE_SCHEMA), sink)
        store.put(cache_shard_key(namespace, shard), sink.getvalue())
    cache.dirty.clear()
    return len(shards)
