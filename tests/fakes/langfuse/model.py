"""The fake Langfuse's data (traces, observations, scores) and the request checks every
endpoint shares: known query parameters, timestamps as zod's ``z.iso.datetime({offset: true})``
takes them (``T`` between date and time, ``Z`` or an offset: no space, which is also what an
unencoded ``+`` in a query string becomes), page limits, cursors, scans narrowed enough for
ClickHouse (else 422, as the real server answers a query past its resource limits),
Langfuse's wire format for timestamps."""

from __future__ import annotations

import base64
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

PAGE_MAX = 100
"""Langfuse's limit on page-numbered lists (``limit`` 1..100, else 400)."""
V2_OBSERVATIONS_MAX = 1000
"""``GET /api/public/v2/observations`` accepts ``limit`` up to 1000."""


@dataclass
class FakeObservation:
    """One observation (span, generation, tool ...) of a trace (``trace_id`` None: Langfuse
    lists it with a null ``traceId``, as the API's schema allows)."""

    id: str
    trace_id: str | None
    start_time: datetime
    type: str = "GENERATION"
    end_time: datetime | None = None
    name: str | None = "chat"
    level: str = "DEFAULT"
    input: Any = None
    output: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    model_parameters: dict[str, Any] | None = None
    usage: dict[str, int] | None = None
    parent_id: str | None = None
    version: str | None = None


@dataclass
class FakeTrace:
    """A trace: its observations and the user and session it belongs to."""

    id: str
    timestamp: datetime
    observations: list[FakeObservation]
    user_id: str | None = None
    session_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeScore:
    """A score on a trace (a trace's scores are deleted with it); ``trace_id`` None: a
    session's score (``session_id``), which names no trace."""

    id: str
    trace_id: str | None
    value: float | bool
    timestamp: datetime
    name: str = "user_feedback"
    data_type: str = "NUMERIC"
    comment: str | None = None  # what the user typed with their feedback
    session_id: str | None = None


class HTTPError(Exception):
    """An error answer: ``status`` and Langfuse's ``{"message": ..., "error": ...}`` body
    (``error``: the server's error class, e.g. ``LangfuseNotFoundError`` for an object that is
    not there; absent where the real server sends none, as its events_only 404)."""

    def __init__(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        error: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}
        self.error = error

    def body(self) -> dict[str, str]:
        """The JSON body of the answer."""
        return {"message": self.message, **({"error": self.error} if self.error else {})}


NOT_FOUND = "LangfuseNotFoundError"
"""The ``error`` of Langfuse's 404 for an object that is not there (not for a missing route)."""
RESOURCE_LIMIT = (
    "Your query could not be completed. Please narrow your request by adding more specific "
    "filters (e.g., a shorter date range)."
)
"""The message of Langfuse's 422 for a ClickHouse query past its memory or time limits."""
# zod 4's z.iso.datetime({offset: true}): date "T" time (seconds and fraction optional), then
# Z or an offset (+02:00, +0200, +02)
_ISO_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)"
)


def ts(at: datetime | None) -> str | None:
    """Langfuse's wire format: UTC, millisecond precision, ``Z``."""
    if at is None:
        return None
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_TIMES = {"fromStartTime", "toStartTime", "fromTimestamp", "toTimestamp"}


def params(q: dict[str, list[str]], allowed: set[str]) -> dict[str, str]:
    """The query as single values; 400 on an unknown or repeated parameter, or a time filter
    zod would refuse."""
    unknown = sorted(set(q) - allowed)
    if unknown:
        raise HTTPError(400, f"Invalid request data: unknown query parameters {unknown}")
    repeated = [k for k, v in q.items() if len(v) > 1 and k not in ("tags", "environment")]
    if repeated:
        raise HTTPError(400, f"Invalid request data: repeated query parameters {repeated}")
    p = {k: v[-1] for k, v in q.items()}
    for key in _TIMES & set(p):  # validated up front, as zod parses the whole query
        when(p, key)
    return p


def integer(p: dict[str, str], key: str, default: int, lo: int, hi: int) -> int:
    """An integer parameter in ``[lo, hi]``; 400 otherwise (as Langfuse's zod schemas do)."""
    try:
        value = int(p.get(key, default))
    except ValueError:
        raise HTTPError(400, f"Invalid request data: {key} must be an integer") from None
    if not lo <= value <= hi:
        raise HTTPError(400, f"Invalid request data: {key} must be in [{lo}, {hi}]")
    return value


def when(p: dict[str, str], key: str) -> datetime | None:
    """A timestamp parameter; 400 unless ISO 8601 as zod takes it (``T``, a timezone)."""
    if key not in p:
        return None
    if not _ISO_DATETIME.fullmatch(p[key]):
        raise HTTPError(400, f"Invalid request data: {key}: Invalid ISO datetime")
    try:
        return datetime.fromisoformat(p[key])
    except ValueError:
        raise HTTPError(400, f"Invalid request data: {key}: Invalid ISO datetime") from None


def narrowed(p: dict[str, str], ids: tuple[str, ...], start: str) -> None:
    """422 (the real server's ClickHouse resource limit) for a list that would read the whole
    project: neither an id filter (indexed: trace, user, session) nor a start time bounds it."""
    if not any(p.get(k) for k in ids) and not p.get(start):
        raise HTTPError(422, RESOURCE_LIMIT, error="Request timed out")


def in_range(at: datetime, p: dict[str, str], lo_key: str, hi_key: str) -> bool:
    """``lo <= at < hi`` for the bounds the query gives."""
    lo, hi = when(p, lo_key), when(p, hi_key)
    return (lo is None or at >= lo) and (hi is None or at < hi)


def keyset_page(
    rows: list[Any], p: dict[str, str], limit: int, key: Any
) -> tuple[list[Any], str | None]:
    """A page of ``rows`` (sorted by ``key``, descending) after the cursor's last key, as
    Langfuse's v2 cursors work: rows deleted meanwhile shift nothing."""
    after = None
    if p.get("cursor"):
        try:
            after = tuple(json.loads(base64.urlsafe_b64decode(p["cursor"]))["k"])
        except (ValueError, KeyError, TypeError):
            raise HTTPError(400, "Invalid cursor") from None
    rest = [r for r in rows if after is None or tuple(key(r)) < after]
    page = rest[:limit]
    if len(rest) <= limit or not page:
        return page, None
    last = list(key(page[-1]))
    return page, base64.urlsafe_b64encode(json.dumps({"k": last}).encode()).decode()


def numbered_page(items: list[Any], p: dict[str, str]) -> dict[str, Any]:
    """Langfuse's page-based envelope (``data`` + ``meta``); ``limit`` 1..100."""
    limit = integer(p, "limit", 50, 1, PAGE_MAX)
    page = integer(p, "page", 1, 1, 10**6)
    return {
        "data": items[(page - 1) * limit : page * limit],
        "meta": {
            "page": page,
            "limit": limit,
            "totalItems": len(items),
            "totalPages": math.ceil(len(items) / limit),
        },
    }
