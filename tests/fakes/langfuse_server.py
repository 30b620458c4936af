"""A loopback HTTP server that speaks the slice of Langfuse's public API flywheel reads.

Endpoints: ``GET /api/public/health``, ``/api/public/v2/observations`` (cursor pages, field
groups, io as raw strings, metadata as a string map truncated at 200 characters unless
expanded), ``/api/public/v3/scores`` (cursor pages, ``subject`` field group),
``/api/public/v2/scores`` and ``/api/public/traces`` (page-based), ``/api/public/traces/{id}``;
annotation queues: ``GET /api/public/annotation-queues``, ``GET`` and ``POST
/api/public/annotation-queues/{queueId}/items`` (Langfuse's shapes: ``objectId``,
``objectType`` TRACE / OBSERVATION / SESSION, ``status`` PENDING / COMPLETED; page-based).
It checks what a real server checks: basic auth, known query parameters, ISO 8601 timestamps
with a timezone, limits, field-group names. Knobs: :meth:`FakeLangfuseServer.fail` makes
requests fail, ``v2_observations_status`` / ``v3_scores_status`` / ``v1_traces_status``
switch those APIs off (404/501).
"""

from __future__ import annotations

import base64
import json
import math
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.langfuse_queues import AnnotationQueues

V2_GROUPS = {
    "core": ("id", "traceId", "startTime", "endTime", "projectId", "parentObservationId", "type"),
    "basic": (
        "name",
        "level",
        "statusMessage",
        "version",
        "environment",
        "bookmarked",
        "public",
        "userId",
        "sessionId",
        "isRootObservation",
    ),
    "time": ("completionStartTime", "createdAt", "updatedAt"),
    "io": ("input", "output"),
    "metadata": ("metadata",),
    "model": ("model", "internalModelId", "modelParameters"),
    "usage": ("usageDetails", "costDetails", "totalCost", "usagePricingTierName"),
    "prompt": ("promptId", "promptName", "promptVersion"),
    "metrics": ("latency", "timeToFirstToken"),
    "trace_context": ("tags", "release", "traceName"),
}
V2_OBS_PARAMS = {
    "fields",
    "expandMetadata",
    "limit",
    "cursor",
    "parseIoAsJson",
    "name",
    "userId",
    "sessionId",
    "type",
    "traceId",
    "level",
    "parentObservationId",
    "isRootObservation",
    "environment",
    "fromStartTime",
    "toStartTime",
    "version",
    "filter",
}
V3_SCORE_PARAMS = {
    "limit",
    "cursor",
    "fields",
    "id",
    "name",
    "source",
    "dataType",
    "environment",
    "configId",
    "queueId",
    "authorUserId",
    "value",
    "valueMin",
    "valueMax",
    "traceId",
    "sessionId",
    "observationId",
    "experimentId",
    "fromTimestamp",
    "toTimestamp",
}
V2_SCORE_PARAMS = {
    "page",
    "limit",
    "userId",
    "name",
    "fromTimestamp",
    "toTimestamp",
    "source",
    "operator",
    "value",
    "scoreIds",
    "configId",
    "queueId",
    "dataType",
    "traceTags",
    "environment",
    "traceId",
    "sessionId",
    "observationId",
}
V1_TRACE_PARAMS = {
    "page",
    "limit",
    "userId",
    "name",
    "sessionId",
    "fromTimestamp",
    "toTimestamp",
    "orderBy",
    "tags",
    "version",
    "release",
    "environment",
    "fields",
}


@dataclass
class FakeObservation:
    id: str
    trace_id: str
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
    id: str
    timestamp: datetime
    observations: list[FakeObservation]
    user_id: str | None = None
    session_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeScore:
    id: str
    trace_id: str
    value: float | bool
    timestamp: datetime
    name: str = "user_feedback"
    data_type: str = "NUMERIC"


class _HTTPError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def ts(at: datetime | None) -> str | None:
    """Langfuse's wire format: UTC, millisecond precision, ``Z``."""
    if at is None:
        return None
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class FakeLangfuseServer(AnnotationQueues):
    """Start with ``with FakeLangfuseServer() as lf:``; point a client at ``lf.url``."""

    def __init__(self, *, public_key: str = "pk-lf-test", secret_key: str = "sk-lf-test"):
        self.public_key, self.secret_key = public_key, secret_key
        self.traces: dict[str, FakeTrace] = {}
        self.scores: list[FakeScore] = []
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.v2_observations_status: int | None = None  # 404 / 501: the v2 read path is off
        self.v3_scores_status: int | None = None
        self.v1_traces_status: int | None = None
        self.batch_delete_status: int | None = None  # 404: DELETE /api/public/traces is missing
        self.deleted_traces: list[str] = []
        self.deleted_scores: list[str] = []
        self._failures: list[dict[str, Any]] = []
        self.annotation_queues: dict[str, dict[str, Any]] = {}
        self.queue_items: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle and knobs ----------------------------------------------------------------
    def start(self) -> FakeLangfuseServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLangfuseServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start() the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def fail(self, path: str, times: int, *, status: int = 500, skip: int = 0) -> None:
        """Let ``skip`` requests to ``path`` pass, then answer the next ``times`` with ``status``."""
        with self._lock:
            self._failures.append({"path": path, "times": times, "status": status, "skip": skip})

    def calls(self, path: str) -> list[dict[str, list[str]]]:
        with self._lock:
            return [params for p, params in self.requests if p == path]

    def add_trace(self, trace: FakeTrace) -> FakeTrace:
        with self._lock:
            self.traces[trace.id] = trace
        return trace

    def add_score(self, score: FakeScore) -> None:
        with self._lock:
            self.scores.append(score)

    def seed(
        self,
        n: int,
        *,
        start: datetime,
        spacing: timedelta,
        feedback: tuple[int | None, ...] = (1, -1, 0, None),
        prefix: str = "t",
    ) -> list[FakeTrace]:
        """N calculator-agent traces from ``start``; every 5th is a SPAN with a GENERATION and a
        TOOL child. Feedback cycles through ``feedback`` (None: no score)."""
        out = []
        for i in range(n):
            at, tid = start + i * spacing, f"{prefix}-{i:05d}"
            a, b = 11 + i % 80, 7 + i % 13
            tool = f"calculator({a}*{b}) = {a * b}"
            gen = FakeObservation(
                id=f"{tid}-gen",
                trace_id=tid,
                start_time=at,
                end_time=at + timedelta(milliseconds=250 + i),
                model="v0",
                version="v0",
                input=[
                    {"role": "system", "content": "You are a calculator agent."},
                    {"role": "tool", "content": tool},
                    {"role": "user", "content": f"What is {a} x {b}?"},
                ],
                output={"role": "assistant", "content": str(a * b)},
                metadata={
                    "prompt_group": f"pg-{i // 3}",
                    "route": "stable",
                    "model_version": "v0",
                    "contexts": [tool],
                },
                model_parameters={"temperature": 0.7, "top_p": 0.95},
                usage={"input": 20 + i % 9, "output": 3, "total": 23 + i % 9},
            )
            obs = [gen]
            if i % 5 == 4:
                root = FakeObservation(
                    id=f"{tid}-agent",
                    trace_id=tid,
                    start_time=at,
                    type="SPAN",
                    name="agent",
                    end_time=gen.end_time,
                )
                gen.parent_id = root.id
                obs = [
                    root,
                    gen,
                    FakeObservation(
                        id=f"{tid}-tool",
                        trace_id=tid,
                        type="TOOL",
                        name="calculator",
                        start_time=at,
                        parent_id=root.id,
                        input={"a": a, "b": b},
                        output=a * b,
                        level="ERROR" if i % 10 == 9 else "DEFAULT",
                    ),
                ]
            out.append(
                self.add_trace(
                    FakeTrace(
                        id=tid,
                        timestamp=at,
                        observations=obs,
                        user_id=f"user-{i % 7}",
                        session_id=f"s-{i}",
                    )
                )
            )
            value = feedback[i % len(feedback)] if feedback else None
            if value is not None:
                self.add_score(
                    FakeScore(
                        id=f"{tid}-fb",
                        trace_id=tid,
                        value=value,
                        timestamp=at + timedelta(minutes=5),
                    )
                )
            self.add_score(
                FakeScore(
                    id=f"{tid}-judge",
                    trace_id=tid,
                    value=0.5,
                    name="judge",
                    timestamp=at + timedelta(minutes=1),
                )
            )
        return out

    def add_agent_trace(
        self,
        trace_id: str,
        *,
        at: datetime,
        messages: list[dict[str, Any]],
        answer: Any,
        user_id: str | None = None,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        retrieved: list[str] | None = None,
        otel: bool = False,
    ) -> FakeTrace:
        """An agent run as Langfuse records it: a root AGENT span; under it, per tool call of
        the conversation, a GENERATION that asked for it and the TOOL observation that ran it;
        an optional RETRIEVER span (``retrieved`` documents); and the final GENERATION whose
        input is the whole conversation and whose output is ``answer``. ``otel``: the final
        generation as an OpenTelemetry GenAI span ingested by Langfuse v3 (no input/output,
        the conversation in ``gen_ai.prompt.N.*`` attributes under ``metadata.attributes``)."""
        root = FakeObservation(
            id=f"{trace_id}-agent", trace_id=trace_id, start_time=at, type="AGENT", name="agent"
        )
        obs = [root]
        step = timedelta(milliseconds=100)
        t = at
        for i, message in enumerate(messages):
            for call in message.get("tool_calls") or []:
                fn = call.get("function") or {}
                result = next(
                    (m.get("content") for m in messages[i:] if m.get("tool_call_id") == call["id"]),
                    None,
                )
                obs.append(
                    FakeObservation(
                        id=f"{trace_id}-gen-{len(obs)}",
                        trace_id=trace_id,
                        start_time=(t := t + step),
                        end_time=t + step,
                        parent_id=root.id,
                        input=messages[:i],
                        output=message,
                        model="v0",
                    )
                )
                obs.append(
                    FakeObservation(
                        id=f"{trace_id}-tool-{len(obs)}",
                        trace_id=trace_id,
                        type="TOOL",
                        name=fn.get("name"),
                        start_time=(t := t + step),
                        end_time=t + step,
                        parent_id=root.id,
                        input=fn.get("arguments"),
                        output=result,
                    )
                )
        if retrieved:
            obs.append(
                FakeObservation(
                    id=f"{trace_id}-retriever",
                    trace_id=trace_id,
                    type="RETRIEVER",
                    name="search",
                    start_time=(t := t + step),
                    end_time=t + step,
                    parent_id=root.id,
                    input={"query": "docs"},
                    output={"documents": [{"page_content": d} for d in retrieved]},
                )
            )
        final = FakeObservation(
            id=f"{trace_id}-final",
            trace_id=trace_id,
            start_time=(t := t + step),
            end_time=t + timedelta(milliseconds=400),
            parent_id=root.id,
            input=messages,
            output=answer,
            model="v0",
            version="v0",
            metadata=dict(metadata or {}),
            model_parameters={"temperature": 0.7},
            usage={"input": 40, "output": 6, "total": 46},
        )
        if otel:
            final.input, final.output = None, None
            final.metadata["attributes"] = _gen_ai_attributes(messages, answer)
        obs.append(final)
        root.end_time = final.end_time
        return self.add_trace(
            FakeTrace(
                id=trace_id, timestamp=at, observations=obs, user_id=user_id, session_id=session_id
            )
        )

    # -- request handling -------------------------------------------------------------------
    def handle(self, path: str, params: dict[str, list[str]], auth: str | None) -> tuple[int, Any]:
        with self._lock:
            self.requests.append((path, params))
        if path == "/api/public/health":
            return 200, {"status": "OK", "version": "3.0.0-fake"}
        expected = (
            "Basic " + base64.b64encode(f"{self.public_key}:{self.secret_key}".encode()).decode()
        )
        if auth != expected:
            return 401, {
                "message": "Invalid credentials. Confirm that you've configured the correct host."
            }
        with self._lock:
            for rule in self._failures:
                if rule["path"] == path and rule["times"] > 0:
                    if rule["skip"] > 0:
                        rule["skip"] -= 1
                        break
                    rule["times"] -= 1
                    return rule["status"], {"message": "Internal Server Error"}
            traces = list(self.traces.values())
            scores = list(self.scores)
        try:
            return 200, self._route(path, params, traces, scores)
        except _HTTPError as exc:
            return exc.status, {"message": exc.message}

    def handle_delete(self, path: str, body: Any, auth: str | None) -> tuple[int, Any]:
        """The public API's deletions: ``DELETE /api/public/traces/{traceId}``,
        ``DELETE /api/public/traces`` with ``{"traceIds": [...]}`` (a trace's scores go with
        it, as in Langfuse) and ``DELETE /api/public/scores/{scoreId}``."""
        with self._lock:
            self.requests.append((f"DELETE {path}", {}))
        expected = (
            "Basic " + base64.b64encode(f"{self.public_key}:{self.secret_key}".encode()).decode()
        )
        if auth != expected:
            return 401, {"message": "Invalid credentials."}
        with self._lock:
            if path == "/api/public/traces":
                if self.batch_delete_status:
                    return self.batch_delete_status, {"message": "Not found"}
                ids = body.get("traceIds") if isinstance(body, dict) else None
                if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                    return 400, {"message": "Invalid request data: traceIds"}
                for tid in ids:
                    self._drop_trace(tid)
                return 200, {"message": "Traces deleted successfully"}
            if path.startswith("/api/public/traces/"):
                tid = unquote(path.rsplit("/", 1)[1])
                if tid not in self.traces:
                    return 404, {"message": "Trace not found within authorized project"}
                self._drop_trace(tid)
                return 200, {"message": "Trace deleted successfully"}
            if path.startswith("/api/public/scores/"):
                sid = unquote(path.rsplit("/", 1)[1])
                if not any(s.id == sid for s in self.scores):
                    return 404, {"message": "Score not found"}
                self.scores = [s for s in self.scores if s.id != sid]
                self.deleted_scores.append(sid)
                return 204, {}
        return 404, {"message": "Not found"}

    def _drop_trace(self, tid: str) -> None:
        if self.traces.pop(tid, None) is not None:
            self.deleted_traces.append(tid)
        self.scores = [s for s in self.scores if s.trace_id != tid]

    def _route(
        self, path: str, q: dict[str, list[str]], traces: list[FakeTrace], scores: list[FakeScore]
    ) -> Any:
        if path.startswith("/api/public/annotation-queues"):
            return self._annotation_queues(path, q)
        if path == "/api/public/v2/observations":
            if self.v2_observations_status:
                raise _HTTPError(self.v2_observations_status, "v2 observations API is not enabled")
            return _observations_v2(_params(q, V2_OBS_PARAMS), traces)
        if path == "/api/public/v3/scores":
            if self.v3_scores_status:
                raise _HTTPError(self.v3_scores_status, "v3 scores API is not enabled")
            return _scores_v3(_params(q, V3_SCORE_PARAMS), scores, traces)
        if path == "/api/public/v2/scores":
            return _scores_v2(_params(q, V2_SCORE_PARAMS), scores)
        if path.startswith("/api/public/traces") and self.v1_traces_status:
            raise _HTTPError(self.v1_traces_status, "Not found")
        if path == "/api/public/traces":
            return _traces_v1(_params(q, V1_TRACE_PARAMS), traces, scores)
        if path.startswith("/api/public/traces/"):
            tid = unquote(path.rsplit("/", 1)[1])
            match = [t for t in traces if t.id == tid]
            if not match:
                raise _HTTPError(404, "Trace not found within authorized project")
            return _trace_v1(match[0], scores, full=True)
        raise _HTTPError(404, "Not found")


def _gen_ai_attributes(messages: list[dict[str, Any]], answer: Any) -> dict[str, Any]:
    """OpenTelemetry GenAI attributes of an LLM span (flattened, as OTLP carries them)."""
    attrs: dict[str, Any] = {
        "gen_ai.system": "openai",
        "gen_ai.request.model": "v0",
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 6,
    }
    for i, m in enumerate(messages):
        for key in ("role", "content", "tool_call_id"):
            if m.get(key) is not None:
                attrs[f"gen_ai.prompt.{i}.{key}"] = m[key]
        for j, call in enumerate(m.get("tool_calls") or []):
            fn = call.get("function") or {}
            attrs[f"gen_ai.prompt.{i}.tool_calls.{j}.id"] = call.get("id")
            attrs[f"gen_ai.prompt.{i}.tool_calls.{j}.name"] = fn.get("name")
            attrs[f"gen_ai.prompt.{i}.tool_calls.{j}.arguments"] = fn.get("arguments")
    attrs["gen_ai.completion.0.role"] = "assistant"
    attrs["gen_ai.completion.0.content"] = answer if isinstance(answer, str) else json.dumps(answer)
    return attrs


def _handler_for(fake: FakeLangfuseServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_DELETE(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            parts = urlsplit(self.path)
            status, reply = fake.handle_delete(parts.path, body, self.headers.get("Authorization"))
            data = b"" if status == 204 else json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            parts = urlsplit(self.path)
            params = parse_qs(parts.query, keep_blank_values=True)
            status, body = fake.handle(parts.path, params, self.headers.get("Authorization"))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                body = None
            status, answer = fake.handle_post(
                urlsplit(self.path).path, body, self.headers.get("Authorization")
            )
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

    return Handler


# -- endpoint bodies ------------------------------------------------------------------------
def _params(q: dict[str, list[str]], allowed: set[str]) -> dict[str, str]:
    unknown = sorted(set(q) - allowed)
    if unknown:
        raise _HTTPError(400, f"Invalid request data: unknown query parameters {unknown}")
    repeated = [k for k, v in q.items() if len(v) > 1 and k not in ("tags", "environment")]
    if repeated:
        raise _HTTPError(400, f"Invalid request data: repeated query parameters {repeated}")
    return {k: v[-1] for k, v in q.items()}


def _int(p: dict[str, str], key: str, default: int, lo: int, hi: int) -> int:
    try:
        value = int(p.get(key, default))
    except ValueError:
        raise _HTTPError(400, f"Invalid request data: {key} must be an integer") from None
    if not lo <= value <= hi:
        raise _HTTPError(400, f"Invalid request data: {key} must be in [{lo}, {hi}]")
    return value


def _when(p: dict[str, str], key: str) -> datetime | None:
    if key not in p:
        return None
    try:
        at = datetime.fromisoformat(p[key])
    except ValueError:
        raise _HTTPError(400, f"Invalid request data: {key} is not ISO 8601") from None
    if at.tzinfo is None:
        raise _HTTPError(400, f"Invalid request data: {key} needs a timezone")
    return at


def _in_range(at: datetime, p: dict[str, str], lo_key: str, hi_key: str) -> bool:
    lo, hi = _when(p, lo_key), _when(p, hi_key)
    return (lo is None or at >= lo) and (hi is None or at < hi)


def _cursor_page(items: list[Any], p: dict[str, str], limit: int) -> tuple[list[Any], str | None]:
    offset = 0
    if p.get("cursor"):
        try:
            offset = json.loads(base64.urlsafe_b64decode(p["cursor"]))["o"]
        except (ValueError, KeyError, TypeError):
            raise _HTTPError(400, "Invalid cursor") from None
    nxt = None
    if offset + limit < len(items):
        nxt = base64.urlsafe_b64encode(json.dumps({"o": offset + limit}).encode()).decode()
    return items[offset : offset + limit], nxt


def _observations_v2(p: dict[str, str], traces: list[FakeTrace]) -> dict[str, Any]:
    groups = {"core", *(g for g in p.get("fields", "core,basic").split(",") if g)}
    if groups - set(V2_GROUPS):
        raise _HTTPError(
            400, f"Invalid request data: unknown field groups {sorted(groups - set(V2_GROUPS))}"
        )
    if p.get("parseIoAsJson") == "true":
        raise _HTTPError(400, "parseIoAsJson is deprecated; input/output are returned as strings")
    limit = _int(p, "limit", 50, 1, 1000)
    expand = set(p.get("expandMetadata", "").split(","))
    rows = [
        (t, o)
        for t in traces
        for o in t.observations
        if _in_range(o.start_time, p, "fromStartTime", "toStartTime")
        and p.get("type", o.type) == o.type
        and p.get("traceId", o.trace_id) == o.trace_id
    ]
    rows.sort(key=lambda r: (r[1].start_time, r[1].id), reverse=True)
    page, cursor = _cursor_page(rows, p, limit)
    keys = {k for g in groups for k in V2_GROUPS[g]}
    data = [{k: v for k, v in _obs_v2(t, o, expand).items() if k in keys} for t, o in page]
    return {"data": data, "meta": {"cursor": cursor} if cursor else {}}


def _raw(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else json.dumps(value)


def _obs_v2(t: FakeTrace, o: FakeObservation, expand: set[str]) -> dict[str, Any]:
    meta = {k: v if isinstance(v, str) else json.dumps(v) for k, v in o.metadata.items()}
    meta = {k: v if k in expand else v[:200] for k, v in meta.items()}
    return {
        **_obs_v1(o),
        "projectId": "proj-fake",
        "environment": "default",
        "bookmarked": False,
        "public": False,
        "userId": t.user_id,
        "sessionId": t.session_id,
        "isRootObservation": o.parent_id is None,
        "input": o.input if isinstance(o.input, str) else _raw(o.input),
        "output": o.output if isinstance(o.output, str) else _raw(o.output),
        "metadata": meta,
        "internalModelId": None,
        "costDetails": {},
        "totalCost": 0.0,
    }


def _obs_v1(o: FakeObservation) -> dict[str, Any]:
    latency = (o.end_time - o.start_time).total_seconds() if o.end_time else None
    usage = o.usage or {}
    return {
        "id": o.id,
        "traceId": o.trace_id,
        "type": o.type,
        "name": o.name,
        "startTime": ts(o.start_time),
        "endTime": ts(o.end_time),
        "completionStartTime": None,
        "createdAt": ts(o.start_time),
        "updatedAt": ts(o.end_time or o.start_time),
        "model": o.model,
        "modelParameters": o.model_parameters,
        "input": o.input,
        "output": o.output,
        "metadata": o.metadata,
        "level": o.level,
        "statusMessage": None,
        "parentObservationId": o.parent_id,
        "version": o.version,
        "usageDetails": usage,
        "usage": {**{k: usage.get(k) for k in ("input", "output", "total")}, "unit": "TOKENS"},
        "latency": latency,
        "timeToFirstToken": None,
    }


def _trace_v1(t: FakeTrace, scores: list[FakeScore], *, full: bool) -> dict[str, Any]:
    root = next((o for o in t.observations if o.parent_id is None), t.observations[0])
    end = max((o.end_time or o.start_time) for o in t.observations)
    own = [s for s in scores if s.trace_id == t.id]
    return {
        "id": t.id,
        "timestamp": ts(t.timestamp),
        "name": root.name,
        "input": root.input,
        "output": root.output,
        "sessionId": t.session_id,
        "userId": t.user_id,
        "metadata": t.metadata,
        "tags": [],
        "public": False,
        "environment": "default",
        "release": None,
        "version": None,
        "htmlPath": f"/project/proj-fake/traces/{t.id}",
        "latency": (end - t.timestamp).total_seconds(),
        "totalCost": 0.0,
        "observations": [_obs_v1(o) for o in t.observations]
        if full
        else [o.id for o in t.observations],
        "scores": [_score_v2(s) for s in own] if full else [s.id for s in own],
    }


def _traces_v1(p: dict[str, str], traces: list[FakeTrace], scores: list[FakeScore]) -> dict:
    page, limit = _int(p, "page", 1, 1, 10**6), _int(p, "limit", 50, 1, 1000)
    if p.get("orderBy", "timestamp.desc") not in ("timestamp.asc", "timestamp.desc"):
        raise _HTTPError(400, "Invalid request data: orderBy")
    rows = sorted(
        (t for t in traces if _in_range(t.timestamp, p, "fromTimestamp", "toTimestamp")),
        key=lambda t: (t.timestamp, t.id),
        reverse=p.get("orderBy") != "timestamp.asc",
    )
    chunk = rows[(page - 1) * limit : page * limit]
    return {
        "data": [_trace_v1(t, scores, full=False) for t in chunk],
        "meta": {
            "page": page,
            "limit": limit,
            "totalItems": len(rows),
            "totalPages": math.ceil(len(rows) / limit),
        },
    }


def _score_core(s: FakeScore) -> dict[str, Any]:
    return {
        "id": s.id,
        "projectId": "proj-fake",
        "name": s.name,
        "value": s.value,
        "dataType": s.data_type,
        "source": "API",
        "timestamp": ts(s.timestamp),
        "environment": "default",
        "createdAt": ts(s.timestamp),
        "updatedAt": ts(s.timestamp),
    }


def _score_v2(s: FakeScore) -> dict[str, Any]:
    body = {**_score_core(s), "traceId": s.trace_id, "observationId": None, "comment": None}
    if s.data_type == "BOOLEAN":
        body.update(value=1.0 if s.value else 0.0, stringValue="True" if s.value else "False")
    return body


def _matching_scores(p: dict[str, str], scores: list[FakeScore]) -> list[FakeScore]:
    names = set(p["name"].split(",")) if p.get("name") else None
    rows = [
        s
        for s in scores
        if (names is None or s.name in names)
        and (not p.get("traceId") or s.trace_id == p["traceId"])
        and _in_range(s.timestamp, p, "fromTimestamp", "toTimestamp")
    ]
    return sorted(rows, key=lambda s: (s.timestamp, s.id), reverse=True)


def _scores_v3(p: dict[str, str], scores: list[FakeScore], traces: list[FakeTrace]) -> dict:
    groups = {g for g in p.get("fields", "").split(",") if g}
    if groups - {"details", "subject", "annotation"}:
        raise _HTTPError(400, "Invalid request data: unknown field groups")
    limit = _int(p, "limit", 50, 1, 100)
    page, cursor = _cursor_page(_matching_scores(p, scores), p, limit)
    data = []
    for s in page:
        item = _score_core(s)
        if "subject" in groups:
            item["subject"] = {"kind": "trace", "id": s.trace_id}
        if "details" in groups:
            item.update(comment=None, configId=None, metadata={})
        data.append(item)
    return {"data": data, "meta": {"limit": limit, **({"cursor": cursor} if cursor else {})}}


def _scores_v2(p: dict[str, str], scores: list[FakeScore]) -> dict[str, Any]:
    page, limit = _int(p, "page", 1, 1, 10**6), _int(p, "limit", 50, 1, 100)
    rows = _matching_scores(p, scores)
    return {
        "data": [_score_v2(s) for s in rows[(page - 1) * limit : page * limit]],
        "meta": {
            "page": page,
            "limit": limit,
            "totalItems": len(rows),
            "totalPages": math.ceil(len(rows) / limit),
        },
    }
