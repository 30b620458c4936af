"""Late feedback: a thumbs-down that arrives hours after its trace still changes its reward.

Collect reads the feedback given since its watermark (``feedback/watermark.json``, with an
hour of overlap for sinks that deliver late) and, for every collected window within the
lookahead (``feedback_lookahead_hours``, default 24), rewrites the rollouts' ``feedback``
column where it changed and marks the window stale for score
(``feedback/stale/score/window=<w>``). The next score run rescores the stale windows and marks
them for curate; the next curate run re-curates them (a rerun replaces a window's rows). Every
step is idempotent: reading the same feedback twice changes nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task

from infra.errors import ObjectNotFound
from infra.keys import (
    FEEDBACK_WATERMARK_KEY,
    ROLLOUTS_PREFIX,
    rollouts_key,
    stale_key,
    stale_prefix,
    window_of_key,
)
from infra.task_retries import IO_RETRIES
from tasks.datasets import read_rollouts

if TYPE_CHECKING:
    from infra.store import ObjectStore
    from infra.traces import TraceSource

OVERLAP = timedelta(hours=1)  # feedback a sink delivered after the previous run read its hour


@dataclass(kw_only=True)
class FeedbackRefresh:
    """What one late-feedback pass did (counts and window ids only)."""

    since: str
    until: str
    read: int  # traces with feedback given in [since, until)
    changed: dict[str, int] = field(default_factory=dict)  # window -> traces whose value changed

    @property
    def traces(self) -> int:
        """How many traces' feedback changed."""
        return sum(self.changed.values())


def read_watermark(store: ObjectStore) -> datetime | None:
    """When late feedback was last read (None: never)."""
    try:
        data = json.loads(store.get(FEEDBACK_WATERMARK_KEY))
    except ObjectNotFound:
        return None
    return datetime.fromisoformat(data["until"]).astimezone(UTC)


def recent_windows(store: ObjectStore, *, since: datetime) -> list[str]:
    """Collected windows that start at or after ``since``, oldest first."""
    windows = {window_of_key(k) for k in store.list(ROLLOUTS_PREFIX)}
    start = since.astimezone(UTC)
    return sorted(
        w
        for w in windows
        if w and datetime.fromisoformat(w.replace("Z", "+00:00")) >= start - timedelta(hours=1)
    )


def apply_feedback(table: pa.Table, feedback: Mapping[str, int]) -> tuple[pa.Table, int]:
    """The rollouts with their ``feedback`` column updated; how many values changed."""
    ids = table.column("trace_id").to_pylist()
    old = table.column("feedback").to_pylist()
    new = [feedback.get(t, v) for t, v in zip(ids, old, strict=True)]
    changed = sum(a != b for a, b in zip(old, new, strict=True))
    if not changed:
        return table, 0
    i = table.column_names.index("feedback")
    column = pa.array(new, type=table.schema.field("feedback").type)
    return table.set_column(i, table.schema.field("feedback"), column), changed


def refresh_feedback(
    store: ObjectStore,
    source: TraceSource,
    *,
    lookahead_hours: int,
    now: datetime | None = None,
) -> FeedbackRefresh:
    """Apply the feedback given since the watermark to the windows within the lookahead, mark
    the windows that changed stale for score, and move the watermark to ``now``."""
    until = (now or datetime.now(UTC)).astimezone(UTC)
    horizon = until - timedelta(hours=lookahead_hours)
    watermark = read_watermark(store)
    since = max(horizon, watermark - OVERLAP) if watermark else horizon
    feedback = source.read_feedback(since, until) if lookahead_hours > 0 else {}
    result = FeedbackRefresh(since=since.isoformat(), until=until.isoformat(), read=len(feedback))
    for window in recent_windows(store, since=horizon) if feedback else []:
        try:
            table = read_rollouts(store, window)
        except ObjectNotFound:  # removed by retention or erasure since the listing
            continue
        updated, changed = apply_feedback(table, feedback)
        if changed:
            sink = io.BytesIO()
            pq.write_table(updated, sink)
            store.put(rollouts_key(window), sink.getvalue())
            mark_stale(store, stage="score", window=window)
            result.changed[window] = changed
    store.put(FEEDBACK_WATERMARK_KEY, json.dumps({"until": until.isoformat()}).encode())
    return result


def mark_stale(store: ObjectStore, *, stage: str, window: str) -> None:
    """Ask ``stage``'s next run to redo ``window`` (one small object: marking is idempotent)."""
    store.put(stale_key(stage, window), b"{}")


def stale_windows(store: ObjectStore, *, stage: str, exclude: str | None = None) -> list[str]:
    """The windows marked stale for ``stage`` (oldest first), without ``exclude``."""
    found = {window_of_key(k) for k in store.list(stale_prefix(stage))}
    return sorted(w for w in found if w and w != exclude)


def clear_stale(store: ObjectStore, *, stage: str, window: str) -> None:
    """Done with ``window``: ``stage`` redid it."""
    with contextlib.suppress(ObjectNotFound):
        store.delete(stale_key(stage, window))


refresh_feedback_task = task(**IO_RETRIES)(refresh_feedback)
stale_windows_task = task(**IO_RETRIES)(stale_windows)
