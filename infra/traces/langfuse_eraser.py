"""Erasure and retention in Langfuse, the production raw store, through its public API.

Finding traces: ``GET /api/public/v2/observations`` (cursor pages, filtered by ``userId`` or
``toStartTime``; the only list a Langfuse v4 server serves in its default ``events_only``
mode), falling back to ``GET /api/public/traces`` (page-based, deprecated) where the server
answers v2 with 404 (a v3 server). Langfuse knows users by raw id; flywheel only holds the
salted key, so the raw id is learned from Langfuse itself: from the first trace the tables
name whose ``userId`` hashes to the key, else from a scan of the list (stopping at the first
match); then the user's traces are listed with the server's own ``userId`` filter.

Deleting: ``DELETE /api/public/traces`` with ``{"traceIds": [...]}``, at most
:data:`DELETE_BATCH_MAX` ids a request (the server's limit); a trace's scores go with it, so
scores are never deleted one by one (each request counts against Langfuse Cloud's daily
``trace-delete`` budget). ``DELETE /api/public/traces/{id}`` one by one only where the batch
endpoint is missing. Langfuse queues deletes (answered at once, also for unknown ids; its
worker deletes a few seconds later), so a delete is *requested* until a read-back no longer
finds the trace (*confirmed*); :meth:`LangfuseEraser.recheck` re-checks pending ones later.
A daily budget that runs out defers the remaining deletes (see :mod:`.langfuse_http`).
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from infra.errors import SourceError, SourceUnavailable, TransientSourceError
from infra.privacy import user_key as hash_user
from infra.traces.langfuse_http import V2_OBSERVATIONS_MAX, LangfuseHttp
from infra.traces.mapping import iso_utc

log = logging.getLogger(__name__)

DELETE_BATCH_MAX = 1000
"""The most trace ids ``DELETE /api/public/traces`` accepts in one request (400 above)."""
_PROBES = 20  # known trace ids tried to learn the user's raw id before scanning
_V2 = "api/public/v2/observations"
_V1 = "api/public/traces"


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

    def __init__(self, *, delete_batch: int = DELETE_BATCH_MAX, **connection: Any) -> None:
        super().__init__(**connection)
        self.delete_batch = max(1, min(delete_batch, DELETE_BATCH_MAX))
        self.api: str | None = None  # "v2" or "v1" once the server has told

    # -- the governance operations ---------------------------------------------------------
    def erase_user(
        self, *, key: str, salt: str, known_trace_ids: Iterable[str]
    ) -> LangfuseDeletion:
        """Delete every trace of the user with salted ``key``: those listed under their raw
        ``userId`` and those of ``known_trace_ids`` (named by flywheel's tables) that Langfuse
        holds; then read back which deletes took effect."""
        raw, present = self._user_id(key, salt, sorted(set(known_trace_ids)))
        ids = present | (self._list(user_id=raw) if raw else set())
        done = self.request_deletes(ids)
        still = self._list(user_id=raw) if raw and self.api == "v2" else None
        return self._read_back(done, still)

    def expire(self, cutoff: datetime) -> LangfuseDeletion:
        """Delete the traces with an observation (v1: a timestamp) before ``cutoff``."""
        done = self.request_deletes(self._list(before=cutoff))
        return self._read_back(done, self._list(before=cutoff) if self.api == "v2" else None)

    def recheck(self, trace_ids: Iterable[str]) -> LangfuseDeletion:
        """A later run's look at pending (or deferred) deletes: those still there are
        requested again (idempotent) and read back; ``confirmed`` is every one gone now."""
        gone, still = self.confirm(trace_ids)
        done = self._read_back(self.request_deletes(still), None)
        done.confirmed = sorted(gone | set(done.confirmed))
        return done

    def confirm(self, trace_ids: Iterable[str]) -> tuple[set[str], set[str]]:
        """(confirmed, pending): which of ``trace_ids`` Langfuse no longer holds, which it
        still does (one read per trace)."""
        ids = set(trace_ids)
        still = {t for t in sorted(ids) if self._exists(t)}
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
            except TransientSourceError as exc:
                if exc.retry_after_s is None or exc.retry_after_s <= self.policy.max_retry_after_s:
                    raise
                done.deferred, done.retry_after_s = ids[i:], exc.retry_after_s
                log.warning(
                    "Langfuse delete budget spent: %d deletes deferred (retry after %.0f s)",
                    len(done.deferred),
                    exc.retry_after_s,
                )
                break
            done.requested += chunk
        return done

    def _delete_batch(self, chunk: list[str]) -> None:
        try:
            self.send("trace delete", "DELETE", _V1, json={"traceIds": chunk})
        except SourceUnavailable:  # an older server without the batch endpoint
            for tid in chunk:
                try:
                    self.send("trace delete", "DELETE", f"{_V1}/{_q(tid)}")
                except SourceUnavailable:
                    continue  # already gone

    def _read_back(self, done: LangfuseDeletion, still: set[str] | None) -> LangfuseDeletion:
        """``done`` with ``confirmed`` filled: from a fresh listing (``still``) when there is
        one, else by reading each requested trace."""
        if still is None:
            confirmed, _ = self.confirm(done.requested)
        else:
            confirmed = set(done.requested) - still
        done.confirmed = sorted(confirmed)
        return done

    # -- finding ----------------------------------------------------------------------------
    def _user_id(self, key: str, salt: str, known: list[str]) -> tuple[str | None, set[str]]:
        """The user's raw id (or None) and which of the first known trace ids Langfuse holds."""
        present: set[str] = set()
        for tid in known[:_PROBES]:
            user = self._trace_user(tid)
            if user is None:
                continue
            present.add(tid)
            if user and hash_user(user, salt) == key:
                return user, present
        for item in self._items(fields="core,basic"):
            user = item.get("userId")
            if user and hash_user(user, salt) == key:
                return str(user), present
        return None, present

    def _trace_user(self, trace_id: str) -> str | None:
        """The trace's ``userId`` ("" when it has none); None when Langfuse does not hold it."""
        if self._v2():
            query = {"traceId": trace_id, "limit": 1, "fields": "core,basic"}
            data = self.send("v2 observations", "GET", _V2, params=query).get("data") or []
            return str(data[0].get("userId") or "") if data else None
        try:
            trace = self.send("v1 trace", "GET", f"{_V1}/{_q(trace_id)}", params={"fields": "core"})
        except SourceUnavailable:
            return None
        return str(trace.get("userId") or "")

    def _exists(self, trace_id: str) -> bool:
        return self._trace_user(trace_id) is not None

    def _list(self, *, user_id: str | None = None, before: datetime | None = None) -> set[str]:
        """Trace ids of the user's traces or of those before ``before``."""
        return {str(item["traceId"]) for item in self._items(user_id=user_id, before=before)}

    def _items(
        self, *, user_id: str | None = None, before: datetime | None = None, fields: str = "core"
    ) -> Iterator[dict[str, Any]]:
        """Observations (v2) or traces (v1, with ``traceId`` set) matching the filters."""
        if self._v2():
            query: dict[str, Any] = {"fields": fields, "limit": self.limit(V2_OBSERVATIONS_MAX)}
            if user_id:
                query["userId"] = user_id
            if before:
                query["toStartTime"] = iso_utc(before)
            yield from self._cursor_pages(query)
            return
        query = {"fields": "core", "limit": self.limit()}
        if user_id:
            query["userId"] = user_id
        if before:
            query["toTimestamp"] = iso_utc(before)
        for trace in self._numbered_pages(query):
            yield {**trace, "traceId": trace["id"]}

    def _v2(self) -> bool:
        """Whether the server lists v2 observations (asked once, then remembered)."""
        if self.api is None:
            try:
                self.send("v2 observations", "GET", _V2, params={"limit": 1})
                self.api = "v2"
            except SourceUnavailable:
                log.warning("Langfuse v2 observations unavailable; using the v1 traces list")
                self.api = "v1"
        return self.api == "v2"

    def _cursor_pages(self, query: dict[str, Any]) -> Iterator[dict[str, Any]]:
        cursor: str | None = None
        while True:
            params = {**query, **({"cursor": cursor} if cursor else {})}
            body = self.send("v2 observations page", "GET", _V2, params=params)
            data = body.get("data") or []
            yield from data
            nxt = (body.get("meta") or {}).get("cursor")
            if not nxt or not data:
                return
            if nxt == cursor:
                raise SourceError("Langfuse returned the same cursor twice for v2 observations")
            cursor = nxt

    def _numbered_pages(self, query: dict[str, Any]) -> Iterator[dict[str, Any]]:
        page = 1
        while True:
            body = self.send("v1 traces page", "GET", _V1, params={**query, "page": page})
            data = body.get("data") or []
            yield from data
            if not data or page >= int((body.get("meta") or {}).get("totalPages") or 0):
                return
            page += 1


def _q(value: str) -> str:
    return urllib.parse.quote(value, safe="")
