"""Langfuse 5.x as a trace source (production), behind the
:class:`~infra.traces.record.TraceSource` protocol.

Reading a window ``[start, end)``:

1. Observations: ``GET /api/public/v2/observations`` through the SDK's API client
   (``api.observations.get_many``, cursor pagination, ``fromStartTime``/``toStartTime``). When
   the server answers 404/501 (the v2 read path is behind a feature flag on some self-hosted
   servers) it falls back to the v1 API: ``GET /api/public/traces`` (page-based,
   ``fromTimestamp``/``toTimestamp``), then ``GET /api/public/traces/{id}`` per trace for its
   observations (the list endpoint only carries observation ids).
2. Feedback: scores named in ``FLYWHEEL_FEEDBACK__SCORE_NAMES`` (default ``user_feedback``)
   from ``api.scores.get_many`` (v3, cursor), with timestamps in
   ``[start, end + feedback_lookahead_hours)``; ``GET /api/public/v2/scores`` (page-based) when
   v3 answers 404/501. The latest score per trace wins.

Every page is retried by the shared policy of :class:`~infra.traces.langfuse_http.LangfuseHttp`
(``page_retries``, backoff with jitter, a 429's ``Retry-After`` honoured); a page that keeps
failing raises :class:`TransientSourceError` so the Prefect task retries the window. A page is
never skipped. Page sizes are clamped to what each endpoint accepts (100; v2 observations 1000).

The mapping of Langfuse JSON to record fields is :mod:`infra.traces.mapping`; what the gateway
writes is :mod:`infra.traces.langfuse_writer`. Langfuse ingests asynchronously (v1 read
endpoints may lag ~10 minutes), so collect a window a little after it closes.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar

import httpx
import pydantic

from infra.errors import SourceError, SourceUnavailable, TransientSourceError
from infra.settings import FeedbackSettings
from infra.traces.langfuse_http import V2_OBSERVATIONS_MAX, LangfuseHttp, translate_status
from infra.traces.mapping import (
    META_CONTEXTS,
    META_LOGPROBS,
    Feedback,
    feedback_value,
    iso_utc,
    parse_time,
    pick_generation,
    record_fields,
    time_key,
)
from infra.traces.observation import Observation, observation
from infra.traces.record import RawLine, WindowBatch, parse_trace

log = logging.getLogger(__name__)
T = TypeVar("T")

V2_FIELDS = "core,basic,time,io,metadata,model,usage,metrics"
_NO_SDK_RETRIES: Any = {"max_retries": 0}  # retries are ours: per page, counted, then raised


@dataclass(frozen=True, kw_only=True)
class Reading:
    """What reading a window keeps: traces of at most ``max_record_bytes`` each, feedback
    scored up to ``feedback_lookahead_hours`` after the window ends, under ``feedback``'s
    score names (``FLYWHEEL_MAX_RECORD_BYTES``,
    ``FLYWHEEL_FEEDBACK_LOOKAHEAD_HOURS``, ``FLYWHEEL_FEEDBACK__*``)."""

    max_record_bytes: int = 1_000_000
    feedback_lookahead_hours: int = 24
    feedback: FeedbackSettings = field(default_factory=FeedbackSettings)


class LangfuseSource(LangfuseHttp):
    """Reads a window of traces and their feedback scores from Langfuse's public API."""

    ROLE = "trace source"

    def __init__(
        self,
        *,
        host: str,
        public_key: str,
        secret_key: str,
        page_size: int = 100,
        page_retries: int = 4,
        timeout_s: float = 30,
        backoff_s: float = 0.5,
        reading: Reading | None = None,
    ):
        from langfuse.api.client import LangfuseAPI

        super().__init__(
            host=host,
            public_key=public_key,
            secret_key=secret_key,
            page_size=page_size,
            retries=page_retries,
            timeout_s=timeout_s,
            backoff_s=backoff_s,
        )
        reading = reading or Reading()
        self.max_record_bytes = reading.max_record_bytes
        self.feedback_lookahead = timedelta(hours=reading.feedback_lookahead_hours)
        self.feedback = reading.feedback
        self._api = LangfuseAPI(
            base_url=self.host,
            username=public_key,
            password=secret_key,
            x_langfuse_sdk_name="python",
            x_langfuse_public_key=public_key,
            httpx_client=self._http,
            timeout=timeout_s,
        )

    @classmethod
    def settings_keywords(cls, settings: Any) -> dict[str, Any]:
        """Connection keywords plus the record size, feedback lookahead and score names."""
        lf = settings.langfuse
        return {
            **cls.connection(lf, cls.ROLE),
            "page_retries": lf.page_retries,
            "reading": Reading(
                max_record_bytes=settings.max_record_bytes,
                feedback_lookahead_hours=settings.feedback_lookahead_hours,
                feedback=settings.feedback,
            ),
        }

    # -- the TraceSource protocol -----------------------------------------------------------
    def read_window(self, start: datetime, end: datetime) -> WindowBatch:
        """Every trace whose generation falls in ``[start, end)``, with its latest feedback.

        Raises:
            TransientSourceError: a page still failed after ``page_retries`` retries.
            SourceError: Langfuse refused the request (bad keys, bad request, schema mismatch).
        """
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("start and end must carry a timezone")
        start, end = start.astimezone(UTC), end.astimezone(UTC)
        try:
            observations, api = self._observations_v2(start, end), "v2"
        except SourceUnavailable as exc:
            log.warning(
                "Langfuse v2 observations unavailable (HTTP %s); using v1 traces", exc.status
            )
            observations, api = self._observations_v1(start, end), "v1"
        batch = self._build_batch(observations, start=start, end=end, api=api)
        feedback = self._feedback(start, end + self.feedback_lookahead)
        for record in batch.records:
            record.feedback = feedback.get(record.trace_id)
        log.info(
            "langfuse %s window %s: %d records, %d invalid, %d with feedback",
            api,
            start.isoformat(),
            len(batch.records),
            len(batch.invalid),
            sum(r.feedback is not None for r in batch.records),
        )
        return batch

    # -- fetching ---------------------------------------------------------------------------
    def _observations_v2(self, start: datetime, end: datetime) -> list[Observation]:
        seen: dict[str, Observation] = {}
        pages = self._cursor_pages(
            "v2 observations page",
            self._api.observations.get_many,
            fields=V2_FIELDS,
            # unexpanded metadata values are cut at 200 characters; "attributes" holds the
            # OpenTelemetry gen_ai.* attributes of an OTLP-ingested span
            expand_metadata=f"{META_CONTEXTS},{META_LOGPROBS},attributes",
            limit=self.limit(V2_OBSERVATIONS_MAX),
            from_start_time=start,
            to_start_time=end,
        )
        for obs in pages:
            item = obs.model_dump(mode="json", exclude_none=True)
            seen.setdefault(item["id"], observation(item, window_time=item.get("startTime")))
        return list(seen.values())

    def _observations_v1(self, start: datetime, end: datetime) -> list[Observation]:
        out: list[Observation] = []
        seen: set[str] = set()
        window = {"fromTimestamp": iso_utc(start), "toTimestamp": iso_utc(end)}
        params = {**window, "orderBy": "timestamp.asc", "limit": self.limit()}
        for trace in self._numbered_pages("v1 traces page", "api/public/traces", query=params):
            if trace["id"] in seen:
                continue
            seen.add(trace["id"])
            path = "api/public/traces/" + urllib.parse.quote(trace["id"], safe="")
            try:
                full = self.send("v1 trace", "GET", path)
            except SourceUnavailable:
                log.warning("Langfuse trace listed but gone when fetched; skipped")
                continue
            for obs in full.get("observations") or []:
                obs.setdefault("traceId", full["id"])
                obs.setdefault("userId", full.get("userId"))
                obs.setdefault("sessionId", full.get("sessionId"))
                out.append(observation(obs, window_time=full.get("timestamp")))
        return out

    def read_feedback(self, start: datetime, end: datetime) -> dict[str, Feedback]:
        """The latest feedback per trace id among scores timestamped in ``[start, end)``
        (late feedback, see :func:`tasks.feedback.refresh_feedback`)."""
        return self._feedback(start, end)

    def _feedback(self, start: datetime, end: datetime) -> dict[str, Feedback]:
        """The latest feedback score (any of ``feedback.score_names``) per trace id, scores
        timestamped in [start, end)."""
        scores: list[tuple[str | None, str, Feedback | None]] = []
        for name in self.feedback.score_names:
            scores += self._scores_named(name, start, end)
        latest: dict[str, tuple[str, Feedback]] = {}
        for tid, at, value in scores:
            if tid and value is not None and (tid not in latest or at >= latest[tid][0]):
                latest[tid] = (at, value)
        return {tid: value for tid, (_at, value) in latest.items()}

    def _scores_named(
        self, name: str, start: datetime, end: datetime
    ) -> list[tuple[str | None, str, Feedback | None]]:
        scores: list[tuple[str | None, str, Feedback | None]] = []
        try:
            pages = self._cursor_pages(
                "v3 scores page",
                self._api.scores.get_many,
                name=name,
                fields="subject",
                limit=self.limit(),
                from_timestamp=start,
                to_timestamp=end,
            )
            for score in pages:
                item = score.model_dump(mode="json", exclude_none=True)
                subject = item.get("subject") or {}
                kind = subject.get("kind")
                tid = subject.get("id") if kind == "trace" else subject.get("traceId")
                value = feedback_value(item, self.feedback)
                scores.append((tid, time_key(item["timestamp"]), value))
        except SourceUnavailable:
            window = {"fromTimestamp": iso_utc(start), "toTimestamp": iso_utc(end)}
            params = {**window, "name": name, "limit": self.limit()}
            scores = [
                (
                    item.get("traceId"),
                    time_key(item["timestamp"]),
                    feedback_value(item, self.feedback),
                )
                for item in self._numbered_pages(
                    "v2 scores page", "api/public/v2/scores", query=params
                )
            ]
        return scores

    def _cursor_pages(self, what: str, fetch: Callable[..., Any], **query: Any) -> Iterator[Any]:
        """Items of every page of an SDK cursor endpoint, each page retried on its own."""
        cursor: str | None = None
        while True:
            request = partial(fetch, cursor=cursor, request_options=_NO_SDK_RETRIES, **query)
            page = self._call(what, request)
            yield from page.data
            if not page.meta.cursor or not page.data:
                return
            if page.meta.cursor == cursor:
                raise SourceError(f"Langfuse returned the same cursor twice for {what}")
            cursor = page.meta.cursor

    def _numbered_pages(self, what: str, path: str, *, query: dict[str, Any]) -> Iterator[Any]:
        """Items of every page of a page-numbered v1 endpoint, each page retried on its own."""
        page = 1
        while True:
            body = self.send(what, "GET", path, params={**query, "page": page})
            data = body.get("data") or []
            yield from data
            if not data or page >= int((body.get("meta") or {}).get("totalPages") or 0):
                return
            page += 1

    def _call(self, what: str, request: Callable[[], T]) -> T:
        """One SDK page request under the shared retry policy, its errors translated at this
        adapter's boundary (:func:`~infra.traces.langfuse_http.translate_status`).

        Raises:
            SourceUnavailable: HTTP 404/501 (the caller may fall back to an older API).
            SourceError: bad keys, a rejected request or a response the SDK cannot read.
            TransientSourceError: the request still failed after ``page_retries`` retries.
        """
        from langfuse.api.core.api_error import ApiError

        def once() -> T:
            try:
                return request()
            except ApiError as exc:
                status = exc.status_code or 0
                error = translate_status(status, exc.headers, what=what, host=self.host)
                raise error or TransientSourceError(
                    f"Langfuse at {self.host} ({what}) answered an unreadable body"
                ) from None
            except httpx.TransportError as exc:
                raise TransientSourceError(
                    f"Langfuse at {self.host} ({what}): {type(exc).__name__}: cannot reach "
                    f"{self.host}; check FLYWHEEL_LANGFUSE__HOST"
                ) from None
            except pydantic.ValidationError:
                raise SourceError(
                    f"Langfuse {what} does not match the SDK's schema (server and "
                    "langfuse SDK versions out of step?)"
                ) from None

        return self.retrying(what, once)

    # -- mapping ----------------------------------------------------------------------------
    def _build_batch(
        self, observations: list[Observation], *, start: datetime, end: datetime, api: str
    ) -> WindowBatch:
        by_trace: dict[str, list[Observation]] = {}
        for obs in observations:
            if tid := obs.get("traceId"):
                by_trace.setdefault(tid, []).append(obs)
        batch, skipped = WindowBatch(), 0
        for trace_id, group in by_trace.items():
            gen = pick_generation(group)
            if gen is None:
                # v2 lists observations by start time: count a trace once it has one in window
                if any(start <= parse_time(o["_windowTime"]) < end for o in group):
                    skipped += 1
                continue
            if not start <= parse_time(gen["_windowTime"]) < end:
                continue
            where = RawLine(
                f"langfuse:{api}/traces/{trace_id}",
                {k: v for k, v in gen.items() if not k.startswith("_")},
            )
            try:
                fields = record_fields(trace_id=trace_id, gen=gen, group=group)
                payload = json.dumps(fields, default=str).encode()
                batch.records.append(parse_trace(payload, max_bytes=self.max_record_bytes))
            except ValueError as exc:
                batch.invalid.append((where, str(exc)))
        if skipped:
            batch.dropped["no_generation"] = skipped
            log.info("langfuse %s: %d traces without a generation dropped", api, skipped)
        return batch
