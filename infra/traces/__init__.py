"""Trace adapters: the record every source is normalised to (:mod:`~infra.traces.record`), the
object-store spool (:mod:`~infra.traces.spool`, the embedded sink and source), and Langfuse
(:mod:`~infra.traces.langfuse_reader`, :mod:`~infra.traces.langfuse_writer`,
:mod:`~infra.traces.langfuse_eraser` with :mod:`~infra.traces.langfuse_finder`,
:mod:`~infra.traces.langfuse_queue`, on the one client
base of :mod:`~infra.traces.langfuse_http`, with the field mapping in
:mod:`~infra.traces.mapping`), imported from their modules so that importing this package does
not load the Langfuse SDK or httpx."""

from infra.traces.record import (
    FeedbackEvent,
    RawLine,
    TraceRecord,
    TraceSink,
    TraceSource,
    WindowBatch,
    parse_trace,
)
from infra.traces.spool import SpoolSink, SpoolSource, SpoolWriter

__all__ = [
    "FeedbackEvent",
    "RawLine",
    "SpoolSink",
    "SpoolSource",
    "SpoolWriter",
    "TraceRecord",
    "TraceSink",
    "TraceSource",
    "WindowBatch",
    "parse_trace",
]
