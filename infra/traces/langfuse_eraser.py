"""Erasure and retention in Langfuse, the production raw store, through its public API.

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

Deleting: ``DELETE /api/public/traces`` with exactly ``{"traceIds": [...]}`` (the server's
schema is strict), at most :data:`DELETE_BATCH_MAX` ids a request; a trace's scores go with it
(the worker deletes scores by trace id), so scores are never deleted one by one (each request
counts against Langfuse Cloud's daily ``trace-delete`` budget). Every trace id flywheel's
tables know for the user is requested, listed or not: a trace without observations (a
feedback score, its comment, is all Langfuse holds of it) is in no observation list.
``DELETE /api/public/traces/{id}`` one by one only where the batch endpoint is missing.
Every delete request spends the budget, so none is retried but on a 429 (nothing was done);
a delete that still fails is *deferred*: the next retention run requests it again. A listed
item whose ``traceId`` is null names no trace (never the id ``"None"``).

Retention deletes the traces with an observation past the cutoff and the *orphans*: traces
with a score past the cutoff and no observation (a feedback score on a trace whose
observations are gone or never came), which no observation list finds (v3 scores, else v2).

Confirming: Langfuse queues deletes (answered at once, also for unknown ids; its worker deletes
a few seconds later), so a delete is *requested* until a read-back finds nothing of the trace
(*confirmed*): no observation (v2), no trace (v1, where served: a 404 that says the trace is
not found, never one that says the endpoint is off) and no score (v3, else v2 scores). A trace
no served endpoint can read (a server answering 404 to both the v2 observations and the v1
trace) is never confirmed: it stays pending and :meth:`LangfuseEraser.recheck` requests and
reads it again later. A daily budget that runs out defers the remaining deletes (see
:mod:`.langfuse_http`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from infra.errors import SourceError, SourceUnavailable, TransientSourceError
from infra.privacy import user_key as hash_user
from infra.traces.langfuse_http import V2_OBSERVATIONS_MAX, LangfuseHttp
from infra.traces.langfuse_scan import (
    list_filters,
    listed_trace_ids,
    quoted,
    scan_windows,
    score_trace,
)
from infra.traces.mapping import iso_utc

log = logging.getLogger(__name__)

DELETE_BATCH_MAX = 1000
"""The most trace ids ``DELETE /api/public/traces`` accepts in one request (400 above)."""
SCAN_DAYS = 366
"""How far back the time scans go (finding a user's raw id, retention): a year, in windows."""
_PROBES = 20  # known trace ids tried to learn the user's raw id before scanning
_V2 = "api/public/v2/observations"
_V1 = "api/public/traces"
_SCORES = {"v3": "api/public/v3/scores", "v2": "api/public/v2/scores"}


@dataclass
class LangfuseDeletion:
    """What was asked of Langfuse and what a read-back showed (trace ids; never user ids).

    ``requested``: deletes Langfuse accepted; ``confirmed``: those a read-back no longer
    finds; ``deferred``: not requested because the server's delete budget ran out
    (``retry_after_s``: when it said to come back). ``api``: ``v2`` or ``v1`` (the list used).
    """

    requested: list[str] = field(default_factory=list)
    confirmed: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    retry_after_s: float | None = None
    api: str = ""

    @property
    def pending(self) -> list[str]:
        """Requested, not yet confirmed: re-check them later (:meth:`LangfuseEraser.recheck`)."""
        done = set(self.confirmed)
        return [t for t in self.requested if t not in done]

    @property
    def traces_deleted(self) -> int:
        """How many trace deletes Langfuse accepted (confirmed or pending)."""
        return len(self.requested)

    def counts(self) -> dict[str, int]:
        """Counts for audit details and reports."""
        return {
            "traces_deleted": len(self.requested),  # requested: Langfuse queues deletes
            "traces_confirmed": len(self.confirmed),
            "traces_pending": len(self.pending),
            "traces_deferred": len(self.deferred),
        }


class LangfuseEraser(LangfuseHttp):
    """Finds and deletes traces through Langfuse's public API (Basic auth with the keys)."""

    ROLE = "erasure"

    def __init__(
        self, *, delete_batch: int = DELETE_BATCH_MAX, scan_days: int = SCAN_DAYS, **connection: Any
    ) -> None:
        super().__init__(**connection)
        self.delete_batch = max(1, min(delete_batch, DELETE_BATCH_MAX))
        self.scan_days = max(1, scan_days)
        self.api: str | None = None  # "v2" or "v1" once the server has told
        self._v1_trace_served: bool | None = None  # GET /api/public/traces/{id}
        self._scores_api: str | None = None  # "v3", "v2" or "" (none) once the server has told

    # -- the governance operations ---------------------------------------------------------
    def erase_user(
        self, *, key: str, salt: str, known_trace_ids: Iterable[str]
    ) -> LangfuseDeletion:
        """Delete every trace of the user with salted ``key``: every id of ``known_trace_ids``
        (named by flywheel's tables; observations or not) and those listed under their raw
        ``userId``; then read back which deletes took effect."""
        known = set(known_trace_ids)
        raw = self._user_id(key, salt, sorted(known))
        listed = self._list(user_id=raw) if raw else set()
        done = self.request_deletes(listed | known)
        if raw and self.api == "v2":  # a fresh listing tells for the listed ones
            still = self._list(user_id=raw)
            gone = (set(done.requested) & listed) - still
            rest = [t for t in done.requested if t not in listed]
            done.confirmed = sorted(gone | self.confirm(rest)[0])
        else:
            done.confirmed = sorted(self.confirm(done.requested)[0])
        return done

    def expire(self, cutoff: datetime) -> LangfuseDeletion:
        """Delete the traces with an observation (v1: a timestamp) before ``cutoff``, and those
        with only a score before it (no observation: a feedback score, its comment, is all
        Langfuse holds of them), within :attr:`scan_days` of it.

        Raises:
            SourceError: the server lists no traces (404 to both lists).
        """
        try:
            listed = self._list_before(cutoff)
        except SourceUnavailable:
            raise SourceError(
                f"Langfuse at {self.host} answers 404 to both trace lists (v2 observations, "
                "v1 traces): retention cannot find the traces past their age there"
            ) from None
        orphans = self._orphans_before(cutoff, known=listed)
        done = self.request_deletes(listed | orphans)
        asked = set(done.requested)
        if self.api == "v2":  # a fresh listing tells for the listed ones
            gone = (asked & listed) - self._list_before(cutoff)
            done.confirmed = sorted(gone | self.confirm(asked & orphans)[0])
        else:
            done.confirmed = sorted(self.confirm(done.requested)[0])
        return done

    def recheck(self, trace_ids: Iterable[str]) -> LangfuseDeletion:
        """A later run's look at pending (or deferred) deletes: those not confirmed gone are
        requested again (idempotent) and read back; ``confirmed`` is every one gone now."""
        gone, still = self.confirm(trace_ids)
        done = self.request_deletes(still)
        done.confirmed = sorted(gone | self.confirm(done.requested)[0])
        return done

    def confirm(self, trace_ids: Iterable[str]) -> tuple[set[str], set[str]]:
        """(confirmed, unconfirmed): which of ``trace_ids`` a read-back finds nothing of, and
        which Langfuse still holds or no served endpoint can read."""
        ids = set(trace_ids)
        still = {t for t in sorted(ids) if self._remains(t) is not False}
        return ids - still, still

    # -- deleting ---------------------------------------------------------------------------
    def request_deletes(self, trace_ids: Iterable[str]) -> LangfuseDeletion:
        """Ask Langfuse to delete the traces (and with them their scores), in batches; a
        budget that runs out defers the rest instead of waiting it out.

        Raises:
            TransientSourceError: a batch still failed after the retries (rerun: idempotent).
            SourceError: bad keys or a refused request.
        """
        ids = sorted(set(trace_ids))
        done = LangfuseDeletion(api=self.api or "")
        for i in range(0, len(ids), self.delete_batch):
            chunk = ids[i : i + self.delete_batch]
            try:
                self._delete_batch(chunk)
            except TransientSourceError as exc:  # not retried: a later run requests them again
                done.deferred, done.retry_after_s = ids[i:], exc.retry_after_s
                log.warning(
                    "Langfuse trace deletes failed (%s): %d deferred to the next retention run",
                    exc,
                    len(done.deferred),
                )
                break
            done.requested += chunk
        return done

    def _delete_batch(self, chunk: list[str]) -> None:
        # each try spends the daily trace-delete budget: only a 429 (nothing done) is retried
        try:
            self.send("trace delete", "DELETE", _V1, json={"traceIds": chunk}, idempotent=False)
        except SourceUnavailable:  # an older server without the batch endpoint
            for tid in chunk:
                try:
                    self.send("trace delete", "DELETE", f"{_V1}/{quoted(tid)}", idempotent=False)
                except SourceUnavailable:
                    continue  # already gone

    # -- finding ----------------------------------------------------------------------------
    def _user_id(self, key: str, salt: str, known: list[str]) -> str | None:
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
            query = {"traceId": trace_id, "limit": 1, "fields": "core,basic"}
            data = self.send("v2 observations", "GET", _V2, params=query).get("data") or []
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
            path = f"{_V1}/{quoted(trace_id)}"
            trace = self.send("v1 trace", "GET", path, params={"fields": "core"})
        except SourceUnavailable as exc:  # not found, or the endpoint is off (events_only)
            self._v1_trace_served = exc.not_found
            return exc.not_found, None
        self._v1_trace_served = True
        return True, trace

    def _remains(self, trace_id: str) -> bool | None:
        """True: Langfuse still holds something of the trace (an observation, the trace, a
        score); False: it was read and nothing is left; None: no served endpoint can read the
        trace or its scores (never confirmed)."""
        body_read = False
        if self._v2():
            query = {"traceId": trace_id, "limit": 1, "fields": "core"}
            if self.send("v2 observations", "GET", _V2, params=query).get("data"):
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
            query = {"traceId": trace_id, "limit": 1}
            try:
                body = self.send(f"{api} scores", "GET", _SCORES[api], params=query)
            except SourceUnavailable:
                continue
            self._scores_api = api
            return bool(body.get("data"))
        self._scores_api = ""
        return None

    def _list(self, *, user_id: str) -> set[str]:
        """Trace ids of the user's traces (the ``userId`` filter narrows the list)."""
        return listed_trace_ids(self._items(user_id=user_id))

    def _list_before(self, cutoff: datetime) -> set[str]:
        """Trace ids with an observation (v1: a timestamp) in the :attr:`scan_days` before
        ``cutoff``, window by window."""
        ids: set[str] = set()
        for start, end in scan_windows(cutoff, self.scan_days):
            ids |= listed_trace_ids(self._items(after=start, before=end))
        return ids

    def _orphans_before(self, cutoff: datetime, *, known: set[str]) -> set[str]:
        """Trace ids with a score before ``cutoff`` (within :attr:`scan_days`), not in
        ``known``, of which no observation (v1: no trace) is left."""
        scored: set[str] = set()
        for start, end in scan_windows(cutoff, self.scan_days):
            scored |= self._score_traces(start, end)
        return {t for t in sorted(scored - known) if not self._observed(t)}

    def _observed(self, trace_id: str) -> bool:
        """Whether Langfuse holds an observation of the trace (v1: the trace itself)."""
        if self._v2():
            query = {"traceId": trace_id, "limit": 1, "fields": "core"}
            return bool(self.send("v2 observations", "GET", _V2, params=query).get("data"))
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
                    items = list(self._cursor_pages(query, path=_SCORES[api], what="v3 scores"))
                else:
                    items = list(self._numbered_pages(query, path=_SCORES[api], what="v2 scores"))
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
                    "v2 observations", "GET", _V2, params={"limit": 1, "fromStartTime": since}
                )
                self.api = "v2"
            except SourceUnavailable:
                log.warning("Langfuse v2 observations unavailable; using the v1 traces list")
                self.api = "v1"
        return self.api == "v2"

    def _cursor_pages(
        self, query: dict[str, Any], *, path: str = _V2, what: str = "v2 observations"
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
        self, query: dict[str, Any], *, path: str = _V1, what: str = "v1 traces"
    ) -> Iterator[dict[str, Any]]:
        page = 1
        while True:
            body = self.send(f"{what} page", "GET", path, params={**query, "page": page})
            data = body.get("data") or []
            yield from data
            if not data or page >= int((body.get("meta") or {}).get("totalPages") or 0):
                return
            page += 1
