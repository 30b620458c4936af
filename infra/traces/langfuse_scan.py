"""What the Langfuse eraser reads off the public API's lists, as plain functions: the trace ids
of listed items and of scores (a null ``traceId`` names no trace, never the id ``"None"``),
the lists' filters, and the time windows a scan goes back in."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

from infra.traces.mapping import iso_utc


def listed_trace_ids(items: Iterable[dict[str, Any]]) -> set[str]:
    """The trace ids of listed items; an item without one (``traceId`` null) names none."""
    return {str(tid) for item in items if (tid := item.get("traceId"))}


def score_trace(item: dict[str, Any]) -> str | None:
    """The trace a score is on: v3 names it in ``subject`` (a trace, or an observation's
    ``traceId``), v2 in ``traceId``; None for a session's or dataset run's score."""
    subject = item.get("subject")
    if isinstance(subject, dict):
        tid = subject.get("id") if subject.get("kind") == "trace" else subject.get("traceId")
    else:
        tid = item.get("traceId")
    return str(tid) if tid else None


def quoted(value: str) -> str:
    """``value`` as one path segment of a Langfuse API URL (every reserved character escaped)."""
    return urllib.parse.quote(value, safe="")


def list_filters(
    user_id: str | None, after: datetime | None, before: datetime | None, lo: str, hi: str
) -> dict[str, str]:
    """The list's ``userId`` and time filters (``lo``/``hi``: the API's names for them)."""
    query = {"userId": user_id} if user_id else {}
    if after:
        query[lo] = iso_utc(after)
    if before:
        query[hi] = iso_utc(before)
    return query


def scan_windows(end: datetime, days: int) -> Iterator[tuple[datetime, datetime]]:
    """``[start, end)`` spans going back from ``end``, 1, 1, 2, 4 ... days long, ``days`` in
    all: each narrow enough for Langfuse, the recent past (where traces are) finely."""
    covered = 0
    while covered < days:
        step = min(max(covered, 1), days - covered)
        yield end - timedelta(days=covered + step), end - timedelta(days=covered)
        covered += step
