"""The spool: the embedded trace sink and source.

JSONL files under ``traces/dt=YYYY-MM-DD/hour=HH/<writer>-<seq>.jsonl`` in the object store. A
line is either a trace (``{"type": "trace", ...record}``) or a feedback event
(``{"type": "feedback", "trace_id": ..., "value": 1|0|-1, "at": ...}``) recorded later.
"""

from __future__ import annotations

import json
import math
import os
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Literal

from pydantic import ValidationError

from infra.keys import hour_prefix
from infra.store import ObjectStore
from infra.traces.record import FeedbackEvent, RawLine, TraceRecord, WindowBatch, parse_trace


def window_hours(start: datetime, hours: int) -> list[datetime]:
    """The ``hours`` whole UTC hours starting with the hour that holds ``start``."""
    start = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return [start + timedelta(hours=i) for i in range(hours)]


def _hour_prefix(at: datetime) -> str:
    at = at.astimezone(UTC)
    return _prefix_of_hour(at.year, at.month, at.day, at.hour)


@lru_cache(maxsize=64)
def _prefix_of_hour(year: int, month: int, day: int, hour: int) -> str:
    """``hour_prefix`` once per hour, not once per line: the lines of an hour share it."""
    return hour_prefix(datetime(year, month, day, hour, tzinfo=UTC))


class SpoolWriter:
    """Appends trace and feedback lines to the spool, one object per flush (atomic PUT).

    Thread-safe; buffers lines per hour and flushes when ``max_lines`` is reached or on
    :meth:`flush`. A writer id plus a sequence number keeps objects from different processes
    apart.
    """

    def __init__(self, store: ObjectStore, *, writer_id: str | None = None, max_lines: int = 500):
        self.store = store
        self.writer_id = writer_id or f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.max_lines = max_lines
        self._seq = 0
        self._buf: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def write_trace(self, record: TraceRecord) -> None:
        """Buffer the trace as a spool line of the hour it was created in."""
        # pydantic's own JSON encoder (Rust), cheaper than model_dump + json.dumps per trace
        line = '{"type": "trace", ' + record.model_dump_json()[1:]
        self._add(_hour_prefix(record.created_at), line)

    def write_feedback(self, event: FeedbackEvent) -> None:
        """Buffer the feedback event as a spool line of the hour it was given in."""
        line = json.dumps({"type": "feedback", **event.model_dump(mode="json")})
        self._add(_hour_prefix(event.at), line)

    def _add(self, prefix: str, line: str) -> None:
        with self._lock:
            self._buf.setdefault(prefix, []).append(line)
            full = len(self._buf[prefix]) >= self.max_lines
        if full:
            self.flush()

    def flush(self) -> int:
        """Write buffered lines; returns how many were written."""
        with self._lock:
            buf, self._buf = self._buf, {}
            seqs = {}
            for prefix in buf:
                self._seq += 1
                seqs[prefix] = self._seq
        written = 0
        for prefix, lines in buf.items():
            key = f"{prefix}{self.writer_id}-{seqs[prefix]:06d}.jsonl"
            self.store.put(key, ("\n".join(lines) + "\n").encode())
            written += len(lines)
        return written


class SpoolSink:
    """The gateway's embedded sink: JSONL objects under ``traces/`` through :class:`SpoolWriter`.

    ``write_*`` only encode and buffer (no I/O: the dispatcher calls them on the event loop);
    :meth:`flush` writes the objects."""

    writes_in_memory = True

    def __init__(self, store: ObjectStore) -> None:
        # the dispatcher decides when to write: no size-triggered flush inside write_trace
        self.writer = SpoolWriter(store, max_lines=10**9)

    def write_trace(self, record: TraceRecord) -> None:
        """Encode and buffer the trace (no I/O)."""
        self.writer.write_trace(record)

    def write_feedback(self, event: FeedbackEvent) -> None:
        """Encode and buffer the feedback event (no I/O)."""
        self.writer.write_feedback(event)

    def flush(self) -> None:
        """Write the buffered lines to the store."""
        self.writer.flush()

    def close(self) -> None:
        """Write the buffered lines to the store."""
        self.writer.flush()


class SpoolSource:
    """Reads the spool written by :class:`SpoolWriter` (the embedded default source)."""

    def __init__(self, store: ObjectStore, *, max_record_bytes: int, lookahead_hours: int = 24):
        self.store = store
        self.max_record_bytes = max_record_bytes
        self.lookahead_hours = lookahead_hours

    def _lines(self, hours: list[datetime]) -> Iterator[tuple[str, bytes]]:
        for hour in hours:
            for key in self.store.list(hour_prefix(hour)):
                for n, line in enumerate(self.store.get(key).split(b"\n"), start=1):
                    if line.strip():
                        yield f"{key}#L{n}", line

    def read_window(self, start: datetime, end: datetime) -> WindowBatch:
        """The traces created in ``[start, end)`` with their latest feedback (given up to
        ``lookahead_hours`` after ``end``); unparsable lines are returned as invalid, with the
        reason."""
        n_hours = max(1, int((end - start).total_seconds() // 3600))
        batch = WindowBatch()
        for where, line in self._lines(window_hours(start, n_hours)):
            if _is_feedback_line(line):
                continue
            try:
                record = parse_trace(line, max_bytes=self.max_record_bytes)
            except ValueError as exc:
                batch.invalid.append((RawLine(where, line), str(exc)))
                continue
            if start <= record.created_at < end:
                batch.records.append(record)
        feedback = self._feedback(start, end + timedelta(hours=self.lookahead_hours))
        for record in batch.records:
            if record.trace_id in feedback:
                record.feedback = feedback[record.trace_id]
        return batch

    def read_feedback(self, start: datetime, end: datetime) -> dict[str, Literal[-1, 0, 1]]:
        """The latest feedback per trace id among events recorded in ``[start, end)`` (late
        feedback, see :func:`tasks.feedback.refresh_feedback`)."""
        return {
            tid: value for tid, (at, value) in self._latest(start, end).items() if start <= at < end
        }

    def _feedback(self, start: datetime, end: datetime) -> dict[str, Literal[-1, 0, 1]]:
        return {tid: value for tid, (_at, value) in self._latest(start, end).items()}

    def _latest(
        self, start: datetime, end: datetime
    ) -> dict[str, tuple[datetime, Literal[-1, 0, 1]]]:
        first = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        last = min(end, datetime.now(UTC) + timedelta(hours=1))
        # every hour that overlaps [start, end), also when start is not on the hour
        n_hours = max(1, math.ceil((last - first).total_seconds() / 3600))
        latest: dict[str, tuple[datetime, Literal[-1, 0, 1]]] = {}
        for _where, line in self._lines(window_hours(first, n_hours)):
            if not _is_feedback_line(line):
                continue
            try:
                event = FeedbackEvent.model_validate_json(line)
            except ValidationError:
                continue  # a broken feedback line only loses that feedback; logged by count
            prev = latest.get(event.trace_id)
            if prev is None or event.at >= prev[0]:
                latest[event.trace_id] = (event.at, event.value)
        return latest


def _is_feedback_line(line: bytes) -> bool:
    return line.lstrip().startswith(b'{"type": "feedback"') or line.lstrip().startswith(
        b'{"type":"feedback"'
    )
