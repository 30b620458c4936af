"""Langfuse 5.x as a trace source (production), behind the :class:`TraceSource` protocol.

Reading a window ``[start, end)``:

1. Observations: ``GET /api/public/v2/observations`` through the SDK's API client
   (``api.observations.get_many``, cursor pagination, ``fromStartTime``/``toStartTime``). When
   the server answers 404/501 (the v2 read path is behind a feature flag on some self-hosted
   servers) it falls back to the v1 API: ``GET /api/public/traces`` (page-based,
   ``fromTimestamp``/``toTimestamp``), then ``GET /api/public/traces/{id}`` per trace for its
   observations (the list endpoint only carries observation ids).
2. Feedback: scores named ``user_feedback`` from ``api.scores.get_many`` (v3, cursor), with
   timestamps in ``[start, end + feedback_lookahead_hours)``; ``GET /api/public/v2/scores``
   (page-based) when v3 answers 404/501. The latest score per trace wins.

Every page is retried with exponential backoff and jitter (``page_retries``); a page that keeps
failing raises :class:`TransientSourceError` so the Prefect task retries the window. A page is
never skipped.

Mapping (one Langfuse trace = one record; the gateway emits one trace per sampled sibling):

- the record's observation is the trace's GENERATION: the root one if any, else the latest;
  traces without a GENERATION are not agent interactions and are skipped (counted in the log)
- ``trace_id`` <- traceId; ``created_at`` <- the generation's startTime; window membership is
  the generation's startTime (v2) or the trace timestamp (v1), exactly what the server filters on
- ``question`` <- the last ``user`` message of the input (OpenAI messages, or
  ``{"messages": [...]}``, or ``{"question": ...}``, or a plain string)
- ``contexts`` <- ``metadata.contexts`` when present, else the input's ``system``/``tool`` messages
- ``answer`` <- the output (a string, an assistant message, an OpenAI completion, or
  ``{"answer": ...}``); ``tool_calls`` <- the output message's ``tool_calls`` plus the trace's
  TOOL observations (name, input, output)
- ``prompt_group``, ``route``, ``pairing_id``, ``model_version``, ``logprobs`` <- metadata keys
  below (``prompt_group`` defaults to the trace id; ``model_version`` to the observation's
  version, then its model name; ``route`` to ``stable``)
- ``temperature``/``top_p`` <- modelParameters; ``tokens_in``/``tokens_out`` <- usageDetails
  ``input``/``output`` (or v1 ``usage``); ``latency_s`` <- latency (else end - start)
- ``user_id``/``session_id`` <- userId/sessionId (of the observation, else of the v1 trace)
- ``error_count`` <- observations of the trace at level ERROR
- ``feedback`` <- the ``user_feedback`` score: NUMERIC by sign (+1 / 0 / -1), BOOLEAN true +1,
  false -1

Metadata values may arrive as strings (the v2 API returns input/output as raw strings and
metadata as a string map); JSON-looking strings are decoded. A trace that cannot be mapped or
fails :func:`parse_trace` is reported in ``WindowBatch.invalid`` with a reason that names fields,
never their values; its raw line is the generation as Langfuse returned it (contains PII).

Writers (the gateway) produce what this reads with the langfuse SDK: one trace per request (and
per diverse-sampling sibling) whose root observation is a generation with ``input`` = the OpenAI
messages, ``output`` = the assistant message, ``model`` = the model version,
``model_parameters`` = temperature/top_p, ``usage_details`` = input/output tokens, ``metadata``
with the ``META_*`` keys below, user and session ids via ``propagate_attributes``, and feedback
as a NUMERIC score ``FEEDBACK_SCORE_NAME`` (1/0/-1) on the trace id. Langfuse ingests
asynchronously (v1 read endpoints may lag ~10 minutes), so collect a window a little after it
closes.
"""

from __future__ import annotations

import json
import logging
import random
import time
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

import httpx
import pydantic

from infra.errors import ConfigError, SourceError, TransientSourceError
from infra.traces import RawLine, WindowBatch, parse_trace

log = logging.getLogger(__name__)
T = TypeVar("T")
Feedback = Literal[-1, 0, 1]

# Metadata keys the gateway writes on each generation (import these, do not retype them).
META_PROMPT_GROUP = "prompt_group"
META_ROUTE = "route"
META_PAIRING_ID = "pairing_id"
META_CONTEXTS = "contexts"
META_MODEL_VERSION = "model_version"
META_LOGPROBS = "logprobs"
METADATA_KEYS = (
    META_PROMPT_GROUP,
    META_ROUTE,
    META_PAIRING_ID,
    META_CONTEXTS,
    META_MODEL_VERSION,
    META_LOGPROBS,
)
FEEDBACK_SCORE_NAME = "user_feedback"
V2_FIELDS = "core,basic,time,io,metadata,model,usage,metrics"
_NO_SDK_RETRIES: Any = {"max_retries": 0}  # retries are ours: per page, counted, then raised
_UNAVAILABLE = (404, 501)
_RETRIABLE_4XX = (408, 409, 425, 429)


class _Unavailable(SourceError):
    """HTTP 404/501: the endpoint is switched off or missing on this server (or the object)."""

    def __init__(self, what: str, status: int):
        super().__init__(
            f"Langfuse answered HTTP {status} to the {what} request (not on this server)"
        )
        self.status = status


class LangfuseSource:
    """Reads a window of traces and their feedback scores from Langfuse's public API."""

    def __init__(
        self,
        *,
        host: str,
        public_key: str,
        secret_key: str,
        page_size: int = 100,
        page_retries: int = 4,
        timeout_s: float = 30,
        max_record_bytes: int = 1_000_000,
        feedback_lookahead_hours: int = 24,
        backoff_s: float = 0.5,
    ):
        from langfuse.api.client import LangfuseAPI

        self.host = host.rstrip("/")
        self.page_size = page_size
        self.page_retries = page_retries
        self.max_record_bytes = max_record_bytes
        self.feedback_lookahead = timedelta(hours=feedback_lookahead_hours)
        self.backoff_s = backoff_s
        self._http = httpx.Client(timeout=timeout_s, follow_redirects=True)
        self._auth = httpx.BasicAuth(public_key, secret_key)
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
    def from_settings(cls, settings: Any) -> LangfuseSource:
        """Build from ``settings.langfuse``; raises ConfigError when the keys are missing."""
        lf = settings.langfuse
        if lf.public_key is None or lf.secret_key is None:
            raise ConfigError(
                "trace source 'langfuse' needs API keys: set FLYWHEEL_LANGFUSE__PUBLIC_KEY and "
                "FLYWHEEL_LANGFUSE__SECRET_KEY (Langfuse UI -> Settings -> API keys), and "
                f"FLYWHEEL_LANGFUSE__HOST (now {lf.host})"
            )
        return cls(
            host=lf.host,
            public_key=lf.public_key.get_secret_value(),
            secret_key=lf.secret_key.get_secret_value(),
            page_size=lf.page_size,
            page_retries=lf.page_retries,
            timeout_s=lf.timeout_s,
            max_record_bytes=settings.max_record_bytes,
            feedback_lookahead_hours=settings.feedback_lookahead_hours,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LangfuseSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        except _Unavailable as exc:
            log.warning(
                "Langfuse v2 observations unavailable (HTTP %s); using v1 traces", exc.status
            )
            observations, api = self._observations_v1(start, end), "v1"
        batch = self._build_batch(observations, start, end, api)
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
    def _observations_v2(self, start: datetime, end: datetime) -> list[dict[str, Any]]:
        seen: dict[str, dict[str, Any]] = {}
        pages = self._cursor_pages(
            "v2 observations page",
            self._api.observations.get_many,
            fields=V2_FIELDS,
            expand_metadata=f"{META_CONTEXTS},{META_LOGPROBS}",
            limit=self.page_size,
            from_start_time=start,
            to_start_time=end,
        )
        for obs in pages:
            item = obs.model_dump(mode="json", exclude_none=True)
            seen.setdefault(item["id"], {**item, "_windowTime": item.get("startTime")})
        return list(seen.values())

    def _observations_v1(self, start: datetime, end: datetime) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        window = {"fromTimestamp": _iso(start), "toTimestamp": _iso(end)}
        params = {**window, "orderBy": "timestamp.asc", "limit": self.page_size}
        for trace in self._numbered_pages("v1 traces page", "api/public/traces", params):
            if trace["id"] in seen:
                continue
            seen.add(trace["id"])
            path = "api/public/traces/" + urllib.parse.quote(trace["id"], safe="")
            try:
                full = self._call("v1 trace", self._get_json, path, {})
            except _Unavailable:
                log.warning("Langfuse trace listed but gone when fetched; skipped")
                continue
            for obs in full.get("observations") or []:
                obs.setdefault("traceId", full["id"])
                obs.setdefault("userId", full.get("userId"))
                obs.setdefault("sessionId", full.get("sessionId"))
                out.append({**obs, "_windowTime": full.get("timestamp")})
        return out

    def _feedback(self, start: datetime, end: datetime) -> dict[str, Feedback]:
        """The latest ``user_feedback`` score per trace id, scores timestamped in [start, end)."""
        scores: list[tuple[str | None, str, Feedback | None]] = []
        try:
            pages = self._cursor_pages(
                "v3 scores page",
                self._api.scores.get_many,
                name=FEEDBACK_SCORE_NAME,
                fields="subject",
                limit=min(self.page_size, 100),
                from_timestamp=start,
                to_timestamp=end,
            )
            for score in pages:
                item = score.model_dump(mode="json", exclude_none=True)
                subject = item.get("subject") or {}
                kind = subject.get("kind")
                tid = subject.get("id") if kind == "trace" else subject.get("traceId")
                scores.append((tid, _utc_key(item["timestamp"]), _feedback_value(item)))
        except _Unavailable:
            window = {"fromTimestamp": _iso(start), "toTimestamp": _iso(end)}
            params = {**window, "name": FEEDBACK_SCORE_NAME, "limit": min(self.page_size, 100)}
            scores = [
                (item.get("traceId"), _utc_key(item["timestamp"]), _feedback_value(item))
                for item in self._numbered_pages("v2 scores page", "api/public/v2/scores", params)
            ]
        latest: dict[str, tuple[str, Feedback]] = {}
        for tid, at, value in scores:
            if tid and value is not None and (tid not in latest or at >= latest[tid][0]):
                latest[tid] = (at, value)
        return {tid: value for tid, (_at, value) in latest.items()}

    def _cursor_pages(self, what: str, fetch: Callable[..., Any], **query: Any) -> Iterator[Any]:
        """Items of every page of an SDK cursor endpoint, each page retried on its own."""
        cursor: str | None = None
        while True:
            page = self._call(what, fetch, cursor=cursor, request_options=_NO_SDK_RETRIES, **query)
            yield from page.data
            if not page.meta.cursor or not page.data:
                return
            if page.meta.cursor == cursor:
                raise SourceError(f"Langfuse returned the same cursor twice for {what}")
            cursor = page.meta.cursor

    def _numbered_pages(self, what: str, path: str, query: dict[str, Any]) -> Iterator[Any]:
        """Items of every page of a page-numbered v1 endpoint, each page retried on its own."""
        page = 1
        while True:
            body = self._call(what, self._get_json, path, {**query, "page": page})
            data = body.get("data") or []
            yield from data
            if not data or page >= int((body.get("meta") or {}).get("totalPages") or 0):
                return
            page += 1

    def _get_json(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        """A v1 call outside the SDK (its 5.x client no longer lists traces); same error family."""
        from langfuse.api.core.api_error import ApiError

        resp = self._http.get(
            urllib.parse.urljoin(self.host + "/", path), params=params, auth=self._auth
        )
        if resp.status_code >= 400:
            raise ApiError(status_code=resp.status_code, body=None)
        try:
            body = resp.json()
        except ValueError:
            raise ApiError(status_code=resp.status_code, body=None) from None
        if not isinstance(body, dict):
            raise SourceError(f"Langfuse {path} returned a {type(body).__name__}, not an object")
        return body

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one page request with retries; translate errors at this adapter's boundary."""
        from langfuse.api.core.api_error import ApiError

        last = ""
        for attempt in range(self.page_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random()))
            try:
                return fn(*args, **kwargs)
            except ApiError as exc:
                status = exc.status_code or 0
                if status in _UNAVAILABLE:
                    raise _Unavailable(what, status) from None
                if status in (401, 403):
                    raise SourceError(
                        f"Langfuse refused the API keys for {what} (HTTP {status}); "
                        "check FLYWHEEL_LANGFUSE__PUBLIC_KEY/SECRET_KEY"
                    ) from None
                if 400 <= status < 500 and status not in _RETRIABLE_4XX:
                    raise SourceError(f"Langfuse rejected {what} (HTTP {status})") from None
                last = f"HTTP {status}" if status >= 300 else "an unreadable response body"
            except httpx.TransportError as exc:
                last = type(exc).__name__
            except pydantic.ValidationError:
                raise SourceError(
                    f"Langfuse {what} does not match the SDK's schema (server and "
                    "langfuse SDK versions out of step?)"
                ) from None
            log.warning(
                "Langfuse %s failed (%s), attempt %d of %d",
                what,
                last,
                attempt + 1,
                self.page_retries + 1,
            )
        raise TransientSourceError(
            f"Langfuse {what} failed {self.page_retries + 1} times (last: {last})"
        )

    # -- mapping ----------------------------------------------------------------------------
    def _build_batch(
        self, observations: list[dict[str, Any]], start: datetime, end: datetime, api: str
    ) -> WindowBatch:
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for obs in observations:
            if obs.get("traceId"):
                by_trace.setdefault(obs["traceId"], []).append(obs)
        batch, skipped = WindowBatch(), 0
        for trace_id, group in by_trace.items():
            gen = _pick_generation(group)
            if gen is None or not start <= _parse_dt(gen["_windowTime"]) < end:
                skipped += gen is None
                continue
            where = RawLine(
                f"langfuse:{api}/traces/{trace_id}",
                {k: v for k, v in gen.items() if not k.startswith("_")},
            )
            try:
                fields = _record_fields(trace_id, gen, group)
                payload = json.dumps(fields, default=str).encode()
                batch.records.append(parse_trace(payload, max_bytes=self.max_record_bytes))
            except ValueError as exc:
                batch.invalid.append((where, str(exc)))
        if skipped:
            log.info("langfuse %s: %d traces without a GENERATION skipped", api, skipped)
        return batch


def _pick_generation(group: list[dict[str, Any]]) -> dict[str, Any] | None:
    gens = [o for o in group if o.get("type") == "GENERATION"]
    roots = [o for o in gens if o.get("isRootObservation") or not o.get("parentObservationId")]
    pool = roots or gens
    return max(pool, key=lambda o: (str(o.get("startTime")), o["id"])) if pool else None


def _record_fields(trace_id: str, gen: dict[str, Any], group: list[dict[str, Any]]) -> dict:
    """The TraceRecord fields of one generation; ValueError reasons never quote values."""
    meta = _decode(gen.get("metadata"))
    meta = {k: _decode(v) for k, v in meta.items()} if isinstance(meta, dict) else {}
    question, input_contexts = _split_input(_decode(gen.get("input")))
    if question is None:
        raise ValueError("no question: the generation input has no user message")
    output = _decode(gen.get("output"))
    answer = _answer(output)
    if answer is None:
        raise ValueError("no answer: the generation has no output text")
    contexts = meta.get(META_CONTEXTS, input_contexts)
    if isinstance(contexts, str):
        contexts = [contexts]
    params = _decode(gen.get("modelParameters"))
    params = params if isinstance(params, dict) else {}
    usage = gen.get("usageDetails") or gen.get("usage") or {}
    latency = gen.get("latency")
    if latency is None and gen.get("endTime"):
        latency = (_parse_dt(gen["endTime"]) - _parse_dt(gen["startTime"])).total_seconds()
    tools = [
        {
            "name": o.get("name"),
            "input": _decode(o.get("input"), loose=True),
            "output": _decode(o.get("output"), loose=True),
        }
        for o in group
        if o.get("type") == "TOOL"
    ]
    if isinstance(output, dict) and isinstance(output.get("tool_calls"), list):
        tools = output["tool_calls"] + tools
    return {
        "trace_id": trace_id,
        "session_id": gen.get("sessionId"),
        "user_id": gen.get("userId"),
        "prompt_group": meta.get(META_PROMPT_GROUP) or trace_id,
        "question": question,
        "contexts": contexts,
        "answer": answer,
        "tool_calls": tools,
        "model_version": meta.get(META_MODEL_VERSION) or gen.get("version") or gen.get("model"),
        "temperature": params.get("temperature"),
        "top_p": params.get("top_p"),
        "latency_s": latency,
        "tokens_in": usage.get("input"),
        "tokens_out": usage.get("output"),
        "error_count": sum(o.get("level") == "ERROR" for o in group),
        "created_at": gen.get("startTime"),
        "route": meta.get(META_ROUTE) or "stable",
        "pairing_id": meta.get(META_PAIRING_ID),
        "logprobs": meta.get(META_LOGPROBS),
    }


def _split_input(value: Any) -> tuple[str | None, list[str]]:
    if isinstance(value, dict) and "messages" in value:
        value = value["messages"]
    if isinstance(value, str):
        return value, []
    if isinstance(value, dict) and "question" in value:
        contexts = value.get("contexts") or []
        return _text(value["question"]), contexts if isinstance(contexts, list) else [contexts]
    if not isinstance(value, list):
        return None, []
    messages = [m for m in value if isinstance(m, dict)]
    users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    contexts = [_text(m.get("content")) for m in messages if m.get("role") in ("system", "tool")]
    return (users[-1] if users else None), [c for c in contexts if c is not None]


def _answer(value: Any) -> str | None:
    if isinstance(value, list):  # a message list: the last assistant turn
        turns = [m for m in value if isinstance(m, dict) and m.get("role") == "assistant"]
        value = turns[-1] if turns else None
    if isinstance(value, dict):
        if isinstance(value.get("choices"), list) and value["choices"]:
            value = (value["choices"][0] or {}).get("message") or {}
        for key in ("content", "answer", "text"):
            if key in value:
                return _text(value[key])
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return json.dumps(value)  # Langfuse stores a numeric-looking output as a JSON number
    return value if isinstance(value, str) else None


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(p for p in parts if isinstance(p, str))
    return None


def _decode(value: Any, *, loose: bool = False) -> Any:
    """Decode JSON-looking strings (v2 returns io raw and metadata as a string map); ``loose``
    also decodes scalars ("42" -> 42), for tool io where v1 and v2 must agree."""
    if isinstance(value, str) and (loose or value[:1] in ("{", "[", '"')):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _feedback_value(score: dict[str, Any]) -> Feedback | None:
    value, kind = score.get("value"), score.get("dataType")
    if kind == "BOOLEAN" or isinstance(value, bool):
        return 1 if value else -1
    if kind == "NUMERIC" and isinstance(value, int | float):
        return 1 if value > 0 else -1 if value < 0 else 0
    return None


def _parse_dt(value: Any) -> datetime:
    at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _utc_key(value: Any) -> str:
    return _parse_dt(value).isoformat()


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")
