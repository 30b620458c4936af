"""Traces leave the request path through a bounded queue; a background task writes them to the
sink (the object-store spool by default, or Langfuse; both sinks live in :mod:`infra.traces`).
The queue is bounded in events (``FLYWHEEL_GATEWAY__TRACE_QUEUE_SIZE``) and in bytes
(``__TRACE_QUEUE_BYTES``: the records' JSON, queued or in the batch being written), since a
trace may weigh up to ten times ``__MAX_TRACE_CHARS``: 10,000 large ones held 4-7 GB while a
sink stalled. A full queue or a failing sink drops the event and counts it in
``flywheel_trace_sink_dropped_total``: tracing never blocks or fails a user's request. Of
several votes on one trace in a batch only the last is written (readers keep the last too).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from infra.gateway.aio import run_in_daemon_thread
from infra.traces import FeedbackEvent, SpoolSink, TraceRecord, TraceSink
from infra.traces.langfuse_writer import LangfuseSink

if TYPE_CHECKING:
    from prometheus_client import Counter

    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

MAX_BATCH = 5000
FEEDBACK_BYTES = 512  # what a feedback event weighs in the queue (ids, a value, a comment cut)
POLL_S = 0.05  # how often the worker looks at the queue while it collects a batch
SLICE = 32  # events validated between two looks at the event loop's other work


def open_sink(settings: Settings, store: ObjectStore) -> TraceSink:
    """The configured sink (``FLYWHEEL_TRACE_SINK``)."""
    if settings.trace_sink == "langfuse":
        return LangfuseSink(settings)
    return SpoolSink(store)


class TraceDispatcher:
    """Bounded queue between request handlers and the sink.

    ``submit_*`` never blocks; the worker hands batches (at most ``maxsize`` events) to a thread
    that writes and flushes them every ``flush_interval_s``. Events lost to a full queue, an
    invalid record or a failing sink are counted on ``dropped``.
    """

    def __init__(
        self,
        sink: TraceSink,
        *,
        maxsize: int,
        dropped: Counter,
        max_bytes: int = 256 * 2**20,
        flush_interval_s: float = 1.0,
    ) -> None:
        self.sink = sink
        self.dropped = dropped
        self.flush_interval_s = flush_interval_s
        self.max_bytes = max_bytes
        self.held_bytes = 0  # queued, or in the batch being collected or written
        self.queue: asyncio.Queue[tuple[str, Any, int]] = asyncio.Queue(maxsize=max(1, maxsize))
        # the batch being collected counts against memory too: at most 2 x maxsize events
        self.max_batch = max(1, min(MAX_BATCH, maxsize))
        self._task: asyncio.Task[None] | None = None
        self._collecting: list[tuple[str, Any, int]] = []
        self._last_error = 0.0

    def submit_trace(self, fields: dict[str, Any], *, size: int) -> None:
        """Queue a trace (the fields of a :class:`TraceRecord`, validated off the request path;
        ``size``: its bytes of JSON)."""
        self._put(("trace", fields, size))

    def submit_feedback(self, event: FeedbackEvent) -> None:
        """Queue a feedback event (never blocks; counted as dropped when the queue is full)."""
        self._put(("feedback", event, FEEDBACK_BYTES))

    def _put(self, item: tuple[str, Any, int]) -> None:
        if self.held_bytes + item[2] > self.max_bytes:
            self.dropped.inc()
            return
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped.inc()
            return
        self.held_bytes += item[2]

    def start(self) -> None:
        """Start the background worker (call inside the running event loop)."""
        self._task = asyncio.create_task(self._run(), name="trace-dispatcher")

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Write what is queued (bounded by ``timeout_s``), then close the sink."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        batch = self._drain(self._collecting)  # what the cancelled worker had collected
        self._collecting = []
        try:
            events, written = await self._hand_over(batch)
            await asyncio.wait_for(
                run_in_daemon_thread(self._write, events, written, True), timeout_s
            )
        except TimeoutError:
            log.warning("trace sink did not finish within %.1f s at shutdown", timeout_s)
        finally:
            self._release(batch)

    async def _run(self) -> None:
        # no timer per event: wait for the first one, then collect for up to flush_interval_s,
        # looking at the queue every POLL_S (and writing early once a batch is full)
        while True:
            batch = self._collecting = [await self.queue.get()]
            deadline = time.monotonic() + self.flush_interval_s
            while len(self._drain(batch)) < self.max_batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                await asyncio.sleep(min(remaining, POLL_S))
            self._collecting = []
            try:
                events, written = await self._hand_over(batch)
                await run_in_daemon_thread(self._write, events, written, False)
            finally:
                self._release(batch)

    def _release(self, batch: list[tuple[str, Any, int]]) -> None:
        """The batch's bytes are no longer held (written, or dropped and counted)."""
        self.held_bytes -= sum(size for _, _, size in batch)

    def _drain(self, batch: list[tuple[str, Any, int]]) -> list[tuple[str, Any, int]]:
        while len(batch) < self.max_batch:
            try:
                batch.append(self.queue.get_nowait())
            except asyncio.QueueEmpty:
                break
        return batch

    async def _hand_over(
        self, batch: list[tuple[str, Any, int]]
    ) -> tuple[list[tuple[str, Any]], int]:
        """Validate the batch's traces on the event loop, ``SLICE`` events at a time with the
        loop's other work in between, and, for a sink whose writes only buffer in memory (the
        spool), write them here too. Returns what the writer thread still has to write, and how
        many events are already written.

        Not in the writer thread: there this pure-Python work would hold the GIL against the
        event loop in long runs (Python switches threads only every 5 ms), and requests arriving
        meanwhile would wait, inflating the gateway's tail latency."""
        in_memory = getattr(self.sink, "writes_in_memory", False)
        events: list[tuple[str, Any]] = []
        written = 0
        pairs = [(kind, payload) for kind, payload, _ in batch]
        for i, (kind, payload) in enumerate(last_vote_only(pairs), start=1):
            if i % SLICE == 0:
                await asyncio.sleep(0)
            try:
                event = TraceRecord.model_validate(payload) if kind == "trace" else payload
            except ValidationError as exc:
                self.dropped.inc()
                self._log(f"invalid trace dropped: {exc.error_count()} field error(s)")
                continue
            if not in_memory:
                events.append((kind, event))
            elif self._write_one(kind, event):
                written += 1
        return events, written

    def _write_one(self, kind: str, event: Any) -> bool:
        try:
            if kind == "trace":
                self.sink.write_trace(event)
            else:
                self.sink.write_feedback(event)
            return True
        except Exception as exc:  # noqa: BLE001 - a sink failure only costs the event
            self.dropped.inc()
            self._log(f"trace sink write failed: {type(exc).__name__}: {exc}")
            return False

    def _write(self, events: list[tuple[str, Any]], written: int, closing: bool) -> None:
        pending = written + sum(self._write_one(kind, event) for kind, event in events)
        try:
            if closing:
                self.sink.close()
            else:
                self.sink.flush()
        except Exception as exc:  # noqa: BLE001
            self.dropped.inc(pending)
            self._log(f"trace sink flush failed, {pending} event(s) dropped: {exc}")

    def _log(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_error > 10:
            log.warning(message)
            self._last_error = now


def last_vote_only(batch: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The batch with only the last feedback event of each trace (one vote per trace)."""
    last = {p.trace_id: i for i, (kind, p) in enumerate(batch) if kind == "feedback"}
    return [
        (kind, p)
        for i, (kind, p) in enumerate(batch)
        if kind != "feedback" or last[p.trace_id] == i
    ]
