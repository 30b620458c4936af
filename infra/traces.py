"""The trace record every source is normalised to, the spool writer, and the trace sources.

The spool is the embedded trace sink/source: JSONL files under
``traces/dt=YYYY-MM-DD/hour=HH/<writer>-<seq>.jsonl`` in the object store. A line is either a
trace (``{"type": "trace", ...record}``) or a feedback event
(``{"type": "feedback", "trace_id": ..., "value": 1|0|-1, "at": ...}``) recorded later.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from infra.keys import hour_prefix
from infra.store import ObjectStore

log = logging.getLogger(__name__)


class TraceRecord(BaseModel):
    """One agent interaction (DESIGN "Trace record")."""

    model_config = ConfigDict(extra="ignore")

    trace_id: str = Field(min_length=1, max_length=128)
    session_id: str | None = None
    user_id: str | None = None
    prompt_group: str = Field(min_length=1, max_length=128)
    question: str
    contexts: list[str] = []
    answer: str
    tool_calls: list[dict[str, Any]] = []
    model_version: str = Field(min_length=1)
    temperature: float | None = Field(default=None, ge=0.0, le=5.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    latency_s: float = Field(ge=0.0)
    tokens_in: int | None = Field(default=None, ge=0)
    tokens_out: int | None = Field(default=None, ge=0)
    error_count: int = Field(default=0, ge=0)
    feedback: Literal[-1, 0, 1] | None = None
    created_at: datetime
    # gateway extras: which route served it, the shadow pairing id, token logprobs
    route: Literal["stable", "canary", "shadow"] = "stable"
    pairing_id: str | None = None
    logprobs: list[float] | None = None

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("created_at must carry a timezone")
        return value.astimezone(UTC)


class FeedbackEvent(BaseModel):
    trace_id: str
    value: Literal[-1, 0, 1]
    at: datetime
    comment: str | None = None


def window_hours(start: datetime, hours: int) -> list[datetime]:
    start = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return [start + timedelta(hours=i) for i in range(hours)]


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
        line = json.dumps({"type": "trace", **record.model_dump(mode="json")})
        self._add(hour_prefix(record.created_at), line)

    def write_feedback(self, event: FeedbackEvent) -> None:
        line = json.dumps({"type": "feedback", **event.model_dump(mode="json")})
        self._add(hour_prefix(event.at), line)

    def write_raw(self, at: datetime, line: str) -> None:
        """Write an arbitrary line (tests use it to plant malformed input)."""
        self._add(hour_prefix(at), line)

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


@dataclass
class RawLine:
    """One line from a source with where it came from (for quarantine pointers)."""

    source: str
    payload: bytes | dict[str, Any]


@dataclass
class WindowBatch:
    """What a source returns for a window: parsed records and the lines it could not parse."""

    records: list[TraceRecord] = field(default_factory=list)
    invalid: list[tuple[RawLine, str]] = field(default_factory=list)  # (line, reason)


class TraceSource(Protocol):
    """Reads every trace whose ``created_at`` is in ``[start, end)`` with its latest feedback."""

    def read_window(self, start: datetime, end: datetime) -> WindowBatch: ...


def parse_trace(payload: bytes | dict[str, Any], *, max_bytes: int) -> TraceRecord:
    """Validate one raw trace; raises ValueError with a reason that never quotes field values."""
    if isinstance(payload, bytes):
        if len(payload) > max_bytes:
            raise ValueError(f"record too large ({len(payload)} bytes > {max_bytes})")
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"invalid UTF-8 at byte {exc.start}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"bad JSON: {exc.msg} at column {exc.colno}") from None
    else:
        data = payload
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    try:
        return TraceRecord.model_validate(data)
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    """Field paths and error kinds only: pydantic's default message quotes the input (PII)."""
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['type']}" for e in exc.errors()]
    return "invalid fields: " + "; ".join(parts[:8])


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

    def _feedback(self, start: datetime, end: datetime) -> dict[str, Literal[-1, 0, 1]]:
        n_hours = max(
            1,
            int((min(end, datetime.now(UTC) + timedelta(hours=1)) - start).total_seconds() // 3600),
        )
        latest: dict[str, tuple[datetime, Literal[-1, 0, 1]]] = {}
        for _where, line in self._lines(window_hours(start, n_hours)):
            if not _is_feedback_line(line):
                continue
            try:
                event = FeedbackEvent.model_validate_json(line)
            except ValidationError:
                continue  # a broken feedback line only loses that feedback; logged by count
            prev = latest.get(event.trace_id)
            if prev is None or event.at >= prev[0]:
                latest[event.trace_id] = (event.at, event.value)
        return {tid: value for tid, (_at, value) in latest.items()}


def _is_feedback_line(line: bytes) -> bool:
    return line.lstrip().startswith(b'{"type": "feedback"') or line.lstrip().startswith(
        b'{"type":"feedback"'
    )
