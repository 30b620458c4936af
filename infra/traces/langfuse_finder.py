"""How the Langfuse eraser (:mod:`infra.traces.langfuse_eraser`) finds traces and confirms
their deletes through Langfuse's public API: :class:`LangfuseFinder`.

Finding traces: ``GET /api/public/v2/observations`` (cursor pages, filtered by ``userId``, or by
start time; the only list a Langfuse v4 server serves in its default ``events_only`` mode),
falling back to ``GET /api/public/traces`` (page-based, deprecated) where the server answers
v2 with 404 (a v3 server). Every list is narrowed by an indexed id (user, trace) or a start
time: Langfuse answers a scan of the whole project with 422 (ClickHouse's resource limit), so
time scans go back in windows (1, 1, 2, 4 ... days, :data:`SCAN_DAYS` in all). Langfuse knows
users by raw id; flywheel only holds the salted key, so the raw id is learned from Langfuse
itself: from the first trace the tables name whose ``userId`` hashes to the key, else from a
scan of the windows (stopping at the first match); then the user's traces are listed with the
server's own ``userId`` filter.

Confirming: Langfuse queues deletes (answered at once, also for unknown ids; its worker deletes
a few seconds later), so a delete is *requested* until a read-back finds nothing of the trace
(*confirmed*): no observation (v2), no trace (v1, where served: a 404 that says the trace is
not found, never one that says the endpoint is off) and no score (v3, else v2 scores). A trace
no served endpoint can read (a server answering 404 to both the v2 observations and the v1
trace) is never confirmed: it stays pending and
:meth:`~infra.traces.langfuse_eraser.LangfuseEraser.recheck` requests and reads it again later. A daily budget that runs out defers the remaining deletes (see
:mod:`.langfuse_http`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from infra.errors import SourceError, SourceUnavailable
from infra.privacy import user_key as hash_user
from infra.traces.langfuse_http import V2_OBSERVATIONS_MAX, LangfuseHttp, Query
from infra.traces.langfuse_scan import (
    list_filters,
    listed_trace_ids,
    quoted,
    scan_windows,
    score_trace,
)
from infra.traces.mapping import iso_utc

log = logging.getLogger(__name__)

SCAN_DAYS = 366
"""How far back the time scans go (finding a user's raw id, retention): a year, in windows."""
_PROBES = 20  # known trace ids tried to learn the user's raw id before scanning
V2_OBSERVATIONS = "api/public/v2/observations"
V1_TRACES = "api/public/traces"
SCORES = {"v3": "api/public/v3/scores", "v2": "api/public/v2/scores"}


class LangfuseFinder(LangfuseHttp):
    """Finds traces (a user's, those past a cutoff, orphans) and reads back what is left of
    them, through Langfuse's public API; which lists the server serves is asked once and
    remembered."""

    def __init__(self, *, scan_days: int = SCAN_DAYS, **connection: Any) -> None:
        super().__init__(**connection)
        self.scan_days = max(1, scan_days)
        self.api: str | None = None  # "v2" or "v1" once the server has told
        self._v1_trace_served: bool | None = None  # GET /api/public/traces/{id}
        self._scores_api: str | None = None  # "v3", "v2" or "" (none) once the server has told

    # -- finding ----------------------------------------------------------------------------
    def find_user_id(self, key: str, salt: str, known: list[str]) -> str | None:
        """The user's raw id from the first known trace that names it, else from a scan back
        in time; None when Langfuse holds no trace of theirs (or lists nothing)."""
        for tid in known[:_PROBES]:
            user = self._trace_user(tid)
            if user and hash_user(user, salt) == key:
                return user
        try:
            for start, end in scan_windows(datetime.now(UTC) + timedelta(days=1), self.scan_days):
                for item in self._items(after=start, before=end, fields="core,basic"):
                    user = item.get("userId")
                    if user and hash_user(user, salt) == key:
                        return str(user)
        except SourceUnavailable:
            log.warning(
                "Langfuse at %s lists no traces (v2 observations and the v1 traces list answer "
                "404): only the traces flywheel knows are deleted, none is confirmed",
                self.host,
            )
        return None

    def _trace_user(self, trace_id: str) -> str | None:
        """The trace's ``userId`` ("" when it has none); None when no read finds the trace."""
        if self._v2():
            query: Query = {"traceId": trace_id, "limit": 1, "fields": "core,basic"}
            data = (
                self.send("v2 observations", "GET", V2_OBSERVATIONS, params=query).get("data") or []
            )
            if data:
                return str(data[0].get("userId") or "")
        trace = self._v1_trace(trace_id)
        return None if trace is None else str(trace.get("userId") or "")

    def _v1_trace(self, trace_id: str) -> dict[str, Any] | None:
        """The v1 trace; None when it is not found, or the endpoint is not served."""
        return self._v1_read(trace_id)[1]

    def _v1_read(self, trace_id: str) -> tuple[bool, dict[str, Any] | None]:
        """(whether the v1 trace endpoint answered for the trace, the trace or None)."""
        if self._v1_trace_served is False:
            return False, None
        try:
            path = f"{V1_TRACES}/{quoted(trace_id)}"
            trace = self.send("v1 trace", "GET", path, params={"fields": "core"})
        except SourceUnavailable as exc:  # not found, or the endpoint is off (events_only)
            self._v1_trace_served = exc.not_found
            return exc.not_found, None
        self._v1_trace_served = True
        return True, trace

    def remains(self, trace_id: str) -> bool | None:
        """True: Langfuse still holds something of the trace (an observation, the trace, a
        score); False: it was read and nothing is left; None: no served endpoint can read the
        trace or its scores (never confirmed)."""
        body_read = False
        if self._v2():
            query: Query = {"traceId": trace_id, "limit": 1, "fields": "core"}
            if self.send("v2 observations", "GET", V2_OBSERVATIONS, params=query).get("data"):
                return True
            body_read = True
        answered, trace = self._v1_read(trace_id)
        if trace is not None:
            return True
        if not (body_read or answered):
            return None
        return self._has_scores(trace_id)

    def _has_scores(self, trace_id: str) -> bool | None:
        """Whether the trace still has a score (v3, else v2 scores); None where neither is
        served."""
        for api in ("v3", "v2") if self._scores_api is None else (self._scores_api,):
            if not api:
                return None
            query: Query = {"traceId": trace_id, "limit": 1}
            try:
                body = self.send(f"{api} scores", "GET", SCORES[api], params=query)
            except SourceUnavailable:
                continue
            self._scores_api = api
            return bool(body.get("data"))
        self._scores_api = ""
        return None

    def user_traces(self, *, user_id: str) -> set[str]:
        """Trace ids of the user's traces (the ``userId`` filter narrows the list)."""
        return listed_trace_ids(self._items(user_id=user_id))

    def traces_before(self, cutoff: datetime) -> set[str]:
        """Trace ids with an observation (v1: a timestamp) in the :attr:`scan_days` before
        ``cutoff``, window by window."""
        ids: set[str] = set()
        for start, end in scan_windows(cutoff, self.scan_days):
            ids |= listed_trace_ids(self._items(after=start, before=end))
        return ids

    def orphans_before(self, cutoff: datetime, *, known: set[str]) -> set[str]:
        """Trace ids with a score before ``cutoff`` (within :attr:`scan_days`), not in
        ``known``, of which no observation (v1: no trace) is left."""
        scored: set[str] = set()
        for start, end in scan_windows(cutoff, self.scan_days):
            scored |= self._score_traces(start, end)
        return {t for t in sorted(scored - known) if not self._observed(t)}

    def _observed(self, trace_id: str) -> bool:
        """Whether Langfuse holds an observation of the trace (v1: the trace itself)."""
        if self._v2():
            query: Query = {"traceId": trace_id, "limit": 1, "fields": "core"}
            return bool(
                self.send("v2 observations", "GET", V2_OBSERVATIONS, params=query).get("data")
            )
        return self._v1_trace(trace_id) is not None

    def _score_traces(self, start: datetime, end: datetime) -> set[str]:
        """Trace ids of the scores in ``[start, end)`` (v3, else v2 scores; none where
        neither is served); scores of a session or dataset run name no trace."""
        window = {"fromTimestamp": iso_utc(start), "toTimestamp": iso_utc(end)}
        for api in ("v3", "v2") if self._scores_api is None else (self._scores_api,):
            if not api:
                return set()
            query = {**window, "limit": self.limit()}
            try:
                if api == "v3":
                    query["fields"] = "subject"
                    items = list(self._cursor_pages(query, path=SCORES[api], what="v3 scores"))
                else:
                    items = list(self._numbered_pages(query, path=SCORES[api], what="v2 scores"))
            except SourceUnavailable:
                continue
            self._scores_api = api
            return {t for item in items if (t := score_trace(item))}
        self._scores_api = ""
        return set()

    def _items(
        self,
        *,
        user_id: str | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        fields: str = "core",
    ) -> Iterator[dict[str, Any]]:
        """Observations (v2) or traces (v1, with ``traceId`` set) matching the filters."""
        if self._v2():
            query: dict[str, Any] = {"fields": fields, "limit": self.limit(V2_OBSERVATIONS_MAX)}
            query |= list_filters(user_id, after, before, "fromStartTime", "toStartTime")
            yield from self._cursor_pages(query)
            return
        query = {"fields": "core", "limit": self.limit()}
        query |= list_filters(user_id, after, before, "fromTimestamp", "toTimestamp")
        for trace in self._numbered_pages(query):
            yield {**trace, "traceId": trace["id"]}

    def _v2(self) -> bool:
        """Whether the server lists v2 observations (asked once, with a query narrow enough
        for any project, then remembered)."""
        if self.api is None:
            since = iso_utc(datetime.now(UTC) - timedelta(minutes=1))
            try:
                self.send(
                    "v2 observations",
                    "GET",
                    V2_OBSERVATIONS,
                    params={"limit": 1, "fromStartTime": since},
                )
                self.api = "v2"
            except SourceUnavailable:
                log.warning("Langfuse v2 observations unavailable; using the v1 traces list")
                self.api = "v1"
        return self.api == "v2"

    def _cursor_pages(
        self, query: dict[str, Any], *, path: str = V2_OBSERVATIONS, what: str = "v2 observations"
    ) -> Iterator[dict[str, Any]]:
        cursor: str | None = None
        while True:
            params = {**query, **({"cursor": cursor} if cursor else {})}
            body = self.send(f"{what} page", "GET", path, params=params)
            data = body.get("data") or []
            yield from data
            nxt = (body.get("meta") or {}).get("cursor")
            if not nxt or not data:
                return
            if nxt == cursor:
                raise SourceError(f"Langfuse returned the same cursor twice for {what}")
            cursor = nxt

    def _numbered_pages(
        self, query: dict[str, Any], *, path: str = V1_TRACES, what: str = "v1 traces"
    ) -> Iterator[dict[str, Any]]:
        page = 1
        while True:
            body = self.send(f"{what} page", "GET", path, params={**query, "page": page})
            data = body.get("data") or []
            yield from data
            if not data or page >= int((body.get("meta") or {}).get("totalPages") or 0):
                return
            page += 1
