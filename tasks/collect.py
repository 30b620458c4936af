"""Stage 1 logic: read a window from a trace source, validate, drop opted-out users, write
``rollouts/window=<start>/batch.parquet``. Plain functions; the ``@task`` wrappers are thin."""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.errors import TransientSourceError, TransientStoreError
from infra.keys import rollouts_key
from infra.privacy import user_key
from infra.retries import retry_on
from infra.traces import RawLine, TraceRecord, TraceSource, WindowBatch

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.store import ObjectStore

ROLLOUT_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("session_id", pa.string()),
        ("user_id", pa.string()),
        ("user_key", pa.string()),
        ("prompt_group", pa.string()),
        ("question", pa.string()),
        ("contexts", pa.list_(pa.string())),
        ("answer", pa.string()),
        ("tool_calls", pa.string()),
        ("model_version", pa.string()),
        ("temperature", pa.float64()),
        ("top_p", pa.float64()),
        ("latency_s", pa.float64()),
        ("tokens_in", pa.int64()),
        ("tokens_out", pa.int64()),
        ("error_count", pa.int64()),
        ("feedback", pa.int8()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("route", pa.string()),
        ("pairing_id", pa.string()),
        ("logprobs", pa.list_(pa.float64())),
        ("window", pa.string()),
    ]
)
TRANSIENT = (TransientSourceError, TransientStoreError)


@dataclass
class CollectResult:
    """Counts of one collect run (no personal data)."""

    window: str
    read: int
    written: int
    quarantined: int
    opted_out: int
    duplicates: int
    key: str


def opted_out_keys(catalog: Catalog) -> set[str]:
    """User keys whose latest consent row says no (absent users count as consenting)."""
    from infra.catalog import scan

    table = scan(catalog, "consent")
    latest: dict[str, tuple[datetime, bool]] = {}
    for key, ok, at in zip(
        table.column("user_key").to_pylist(),
        table.column("consent_to_training").to_pylist(),
        table.column("updated_at").to_pylist(),
        strict=True,
    ):
        if key not in latest or at >= latest[key][0]:
            latest[key] = (at, bool(ok))
    return {key for key, (_at, ok) in latest.items() if not ok}


def dedupe(records: list[TraceRecord]) -> tuple[list[TraceRecord], int]:
    """Keep the first record of each trace id (a sink may deliver twice)."""
    seen: set[str] = set()
    kept = []
    for record in records:
        if record.trace_id not in seen:
            seen.add(record.trace_id)
            kept.append(record)
    return kept, len(records) - len(kept)


def drop_opted_out(
    records: list[TraceRecord], opted_out: set[str], salt: str
) -> tuple[list[TraceRecord], int]:
    """Remove traces of users who opted out of training."""
    kept = [r for r in records if not r.user_id or user_key(r.user_id, salt) not in opted_out]
    return kept, len(records) - len(kept)


def quarantine_row(stage: str, window: str, line: RawLine, reason: str) -> dict[str, Any]:
    """A quarantine row pointing at the raw line; the line's text is not copied (it may hold
    PII): only its location, size and hash, so the raw input stays findable and nothing is lost."""
    payload = line.payload if isinstance(line.payload, bytes) else json.dumps(line.payload).encode()
    record = {
        "source": line.source,
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    return {
        "stage": stage,
        "window": window,
        "reason": reason,
        "record": json.dumps(record),
        "at": datetime.now(UTC),
    }


def to_parquet(records: list[TraceRecord], *, window: str, salt: str) -> bytes:
    """The rollouts batch as Parquet bytes."""
    rows = []
    for r in records:
        row = r.model_dump()
        row["tool_calls"] = json.dumps(r.tool_calls)
        row["user_key"] = user_key(r.user_id, salt) if r.user_id else None
        row["window"] = window
        rows.append(row)
    cols = {f.name: [row.get(f.name) for row in rows] for f in ROLLOUT_SCHEMA}
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pydict(cols, schema=ROLLOUT_SCHEMA), sink)
    return sink.getvalue()


def read_rollouts(store: ObjectStore, window: str) -> pa.Table:
    """Stage 1's output for a window (used by stages 2 and 3)."""
    return pq.read_table(io.BytesIO(store.get(rollouts_key(window))))


@task(
    retries=3,
    retry_delay_seconds=[2, 5, 15],
    retry_jitter_factor=0.5,
    cache_policy=NO_CACHE,
    retry_condition_fn=retry_on(*TRANSIENT),
)
def read_window_task(source: TraceSource, start: datetime, hours: int) -> WindowBatch:
    """Returns the window's parsed traces and the lines that failed validation."""
    return source.read_window(start, start + timedelta(hours=hours))


@task(
    retries=3,
    retry_delay_seconds=[2, 5, 15],
    retry_jitter_factor=0.5,
    cache_policy=NO_CACHE,
    retry_condition_fn=retry_on(*TRANSIENT),
)
def write_batch_task(store: ObjectStore, window: str, data: bytes) -> str:
    """Returns the key of the rollouts batch written (atomically, replacing a previous run)."""
    key = rollouts_key(window)
    store.put(key, data)
    return key


@task(retries=2, retry_delay_seconds=[2, 10], cache_policy=NO_CACHE)
def quarantine_task(catalog: Catalog, stage: str, window: str, rows: list[dict[str, Any]]) -> int:
    """Returns how many rows the window's quarantine now holds for this stage (replaced)."""
    from pyiceberg.expressions import And, EqualTo

    from infra.catalog import replace_where

    replace_where(
        catalog, "quarantine", And(EqualTo("stage", stage), EqualTo("window", window)), rows
    )
    return len(rows)
