"""A loopback HTTP server that speaks the slice of Langfuse's public API flywheel uses, routed
by a table (:data:`ROUTES`: method, path pattern, handler, rate-limit resource, the write
modes that serve it).

It follows the real server (Langfuse v4, read from its source) where clients trip:

- ``mode``: ``"events_only"`` (v4's default) answers the deprecated lists
  (``GET /api/public/traces``, ``/traces/{id}``, ``/v2/scores``) with 404 before checking the
  keys; ``"legacy"`` (a v3 server) has no v2 observations or v3 scores (404); ``"dual"`` (the
  default here) serves both.
- Limits: page-numbered lists and v3 scores take ``limit`` 1..100, v2 observations up to
  1000, ``DELETE /api/public/traces`` 1..1000 ids (:attr:`max_delete_batch`); 400 beyond.
- :meth:`FakeLangfuseServer.rate_limit`: a budget per resource (``public-api``,
  ``public-api-legacy``, ``trace-delete``) answered with 429 and ``Retry-After``.
- Deletes are queued (200 at once, also for unknown ids) and take effect later
  (:attr:`deletes`; a trace's scores go with it, also when no trace was ever ingested for its
  id, as the worker deletes scores by trace id). The batch body is zod-strict: exactly
  ``{"traceIds": [...]}``, any other field is a 400.
- Lists no id filter nor start time narrows answer 422 (ClickHouse's resource limit);
  timestamps must be ISO 8601 with ``T`` and a timezone (400 otherwise).
- 404s say why: ``error: LangfuseNotFoundError`` for a trace that is not there, no ``error``
  where the endpoint is off (events_only, a missing route).

Knobs kept from earlier tests: :meth:`fail`, and ``v2_observations_status`` /
``v3_scores_status`` / ``v1_traces_status`` / ``batch_delete_status`` to switch one API off.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.langfuse import reads
from tests.fakes.langfuse.limits import Budget, DeleteQueue
from tests.fakes.langfuse.model import FakeScore, FakeTrace, HTTPError
from tests.fakes.langfuse.queues import AnnotationQueues
from tests.fakes.langfuse.seeding import Seeding

ALL_MODES = frozenset({"events_only", "dual", "legacy"})
V4_READS = frozenset({"events_only", "dual"})
LEGACY_READS = frozenset({"dual", "legacy"})
EVENTS_ONLY_404 = (
    "This endpoint is not available on deployments running in Langfuse v4 events_only mode. "
    "Learn more about Langfuse v4 at: https://langfuse.com/docs/v4"
)


@dataclass(frozen=True)
class Route:
    """One endpoint: ``handler`` is a method name called with (query, body, *path groups)."""

    method: str
    pattern: str
    handler: str
    resource: str | None = "public-api"
    modes: frozenset[str] = ALL_MODES
    switch: str | None = None  # a ``*_status`` attribute that turns the endpoint off


Q = "/api/public/annotation-queues"
ROUTES = [
    Route("GET", "/api/public/health", "health", resource=None),
    Route(
        "GET",
        "/api/public/v2/observations",
        "observations_v2",
        modes=V4_READS,
        switch="v2_observations_status",
    ),
    Route("GET", "/api/public/v3/scores", "scores_v3", modes=V4_READS, switch="v3_scores_status"),
    Route("GET", "/api/public/v2/scores", "scores_v2", "public-api-legacy", LEGACY_READS),
    Route(
        "GET",
        "/api/public/traces",
        "traces_v1",
        "public-api-legacy",
        LEGACY_READS,
        switch="v1_traces_status",
    ),
    Route(
        "GET",
        "/api/public/traces/([^/]+)",
        "trace_v1",
        "public-api-legacy",
        LEGACY_READS,
        switch="v1_traces_status",
    ),
    Route(
        "DELETE",
        "/api/public/traces",
        "delete_traces",
        "trace-delete",
        switch="batch_delete_status",
    ),
    Route("DELETE", "/api/public/traces/([^/]+)", "delete_trace", "trace-delete"),
    Route("GET", Q, "queues_list"),
    Route("GET", Q + "/([^/]+)", "queue_get"),
    Route("GET", Q + "/([^/]+)/items", "queue_items_list"),
    Route("POST", Q + "/([^/]+)/items", "queue_item_add"),
]
_COMPILED = [(route, re.compile(route.pattern + "$")) for route in ROUTES]


class FakeLangfuseServer(Seeding, AnnotationQueues):
    """Start with ``with FakeLangfuseServer() as lf:``; point a client at ``lf.url``."""

    def __init__(
        self, *, public_key: str = "pk-lf-test", secret_key: str = "sk-lf-test", mode: str = "dual"
    ):
        self.public_key, self.secret_key, self.mode = public_key, secret_key, mode
        self.traces: dict[str, FakeTrace] = {}
        self.scores: list[FakeScore] = []
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.v2_observations_status: int | None = None  # 404 / 501: the v2 read path is off
        self.v3_scores_status: int | None = None
        self.v1_traces_status: int | None = None
        self.batch_delete_status: int | None = None  # 404: DELETE /api/public/traces is missing
        self.max_delete_batch = 1000
        self.deleted_traces: list[str] = []
        self.delete_batches: list[list[str]] = []
        self.deletes = DeleteQueue()
        self.budgets: dict[str, Budget] = {}
        self._failures: list[dict[str, Any]] = []
        self.annotation_queues: dict[str, dict[str, Any]] = {}
        self.queue_items: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle and knobs ----------------------------------------------------------------
    def start(self) -> FakeLangfuseServer:
        """Serve on a free loopback port in a background thread."""
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
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
        """The server's base URL."""
        assert self._httpd is not None, "start() the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def fail(self, path: str, times: int, *, status: int = 500, skip: int = 0) -> None:
        """Let ``skip`` requests to ``path`` pass, then answer the next ``times`` with ``status``."""
        with self._lock:
            self._failures.append({"path": path, "times": times, "status": status, "skip": skip})

    def rate_limit(self, resource: str, points: int, *, window_s: float = 1.0) -> Budget:
        """Allow ``points`` requests to ``resource`` per window of ``window_s`` seconds."""
        with self._lock:
            self.budgets[resource] = Budget(points, window_s)
            return self.budgets[resource]

    def calls(self, path: str) -> list[dict[str, list[str]]]:
        """The query (DELETE: the ``traceIds``) of every request to ``path`` so far."""
        with self._lock:
            return [params for p, params in self.requests if p == path]

    def add_trace(self, trace: FakeTrace) -> FakeTrace:
        """Store a trace (replacing one with its id)."""
        with self._lock:
            self.traces[trace.id] = trace
        return trace

    def add_score(self, score: FakeScore) -> None:
        """Store a score."""
        with self._lock:
            self.scores.append(score)

    def process_deletions(self) -> None:
        """Langfuse's worker ran: every queued delete takes effect."""
        with self._lock:
            self._drop(self.deletes.process())

    # -- dispatch ---------------------------------------------------------------------------
    def dispatch(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, auth: str | None
    ) -> tuple[int, Any, dict[str, str]]:
        """One request through the route table: (status, JSON body, extra headers)."""
        shown = path if method in ("GET", "POST") else f"{method} {path}"
        ids = body.get("traceIds") if method == "DELETE" and isinstance(body, dict) else None
        with self._lock:
            self.requests.append((shown, {"traceIds": ids} if isinstance(ids, list) else query))
        try:
            route, groups = _match(method, path)
            return 200, self._serve(route, groups, path, query, body, auth), {}
        except HTTPError as exc:
            return exc.status, exc.body(), exc.headers

    def _serve(
        self, route: Route, groups: tuple[str, ...], path: str, q: Any, body: Any, auth: Any
    ) -> Any:
        if route.resource is None:
            return getattr(self, route.handler)(q, body)
        if self.mode == "events_only" and route.modes == LEGACY_READS:
            raise HTTPError(404, EVENTS_ONLY_404)  # checked before the keys, as Langfuse does
        expected = f"{self.public_key}:{self.secret_key}".encode()
        if auth != "Basic " + base64.b64encode(expected).decode():
            raise HTTPError(401, "Invalid credentials. Confirm that you've configured the host.")
        with self._lock:
            self._throttle(route.resource)
            self._injected_failure(path)
            if route.method == "GET":
                self._drop(self.deletes.on_read())
        if self.mode not in route.modes:
            raise HTTPError(404, "Not available in this Langfuse version")
        off = getattr(self, route.switch) if route.switch else None
        if off:
            raise HTTPError(off, "Not found")
        return getattr(self, route.handler)(q, body, *(unquote(g) for g in groups))

    def _throttle(self, resource: str) -> None:
        budget = self.budgets.get(resource)
        wait = budget.take() if budget else None
        if wait is not None:
            raise HTTPError(429, "Rate limit exceeded", {"Retry-After": str(wait)})

    def _injected_failure(self, path: str) -> None:
        for rule in self._failures:
            if rule["path"] == path and rule["times"] > 0:
                if rule["skip"] > 0:
                    rule["skip"] -= 1
                    return
                rule["times"] -= 1
                raise HTTPError(rule["status"], "Internal Server Error")

    # -- routes -----------------------------------------------------------------------------
    def health(self, q: Any, body: Any) -> dict[str, Any]:
        """``GET /api/public/health``."""
        return {"status": "OK", "version": "4.0.0-fake"}

    def observations_v2(self, q: dict[str, list[str]], body: Any) -> dict[str, Any]:
        """``GET /api/public/v2/observations``."""
        return reads.observations_v2(q, self._snapshot()[0])

    def scores_v3(self, q: dict[str, list[str]], body: Any) -> dict[str, Any]:
        """``GET /api/public/v3/scores``."""
        return reads.scores_v3(q, self._snapshot()[1])

    def scores_v2(self, q: dict[str, list[str]], body: Any) -> dict[str, Any]:
        """``GET /api/public/v2/scores`` (deprecated)."""
        return reads.scores_v2(q, self._snapshot()[1])

    def traces_v1(self, q: dict[str, list[str]], body: Any) -> dict[str, Any]:
        """``GET /api/public/traces`` (deprecated)."""
        return reads.traces_v1(q, *self._snapshot())

    def trace_v1(self, q: dict[str, list[str]], body: Any, tid: str) -> dict[str, Any]:
        """``GET /api/public/traces/{traceId}`` (deprecated)."""
        return reads.trace_v1(q, *self._snapshot(), tid)

    def delete_traces(self, q: Any, body: Any) -> dict[str, Any]:
        """``DELETE /api/public/traces`` with ``{"traceIds": [...]}`` (1..1000 ids): queued."""
        ids = body.get("traceIds") if isinstance(body, dict) else None
        extra = sorted(set(body) - {"traceIds"}) if isinstance(body, dict) else []
        if extra:  # DeleteTracesV1Body is z.object({...}).strict()
            raise HTTPError(400, f"Invalid request data: unrecognized keys {extra}")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise HTTPError(400, "Invalid request data: traceIds")
        if not ids:
            raise HTTPError(400, "At least 1 traceId is required.")
        if len(ids) > self.max_delete_batch:
            raise HTTPError(400, "Cannot specify more than 1000 traces in a single request.")
        with self._lock:
            self.delete_batches.append(list(ids))
            self._drop(self.deletes.add(ids))
        return {"message": "Traces deleted successfully"}

    def delete_trace(self, q: Any, body: Any, tid: str) -> dict[str, Any]:
        """``DELETE /api/public/traces/{traceId}``: queued, 200 also for an unknown id."""
        with self._lock:
            self._drop(self.deletes.add([tid]))
        return {"message": "Trace deleted successfully"}

    def _snapshot(self) -> tuple[list[FakeTrace], list[FakeScore]]:
        with self._lock:
            return list(self.traces.values()), list(self.scores)

    def _drop(self, trace_ids: list[str]) -> None:
        """Delete the traces and their scores (the lock is held)."""
        gone = set(trace_ids)
        for tid in trace_ids:
            if self.traces.pop(tid, None) is not None or any(
                s.trace_id == tid for s in self.scores
            ):
                self.deleted_traces.append(tid)
        if gone:
            self.scores = [s for s in self.scores if s.trace_id not in gone]


def _match(method: str, path: str) -> tuple[Route, tuple[str, ...]]:
    for route, pattern in _COMPILED:
        found = pattern.match(path)
        if found and route.method == method:
            return route, found.groups()
    raise HTTPError(404, "Not found")


def _handler_for(fake: FakeLangfuseServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length)) if length else None
            except ValueError:
                body = None
            parts = urlsplit(self.path)
            query = parse_qs(parts.query, keep_blank_values=True)
            auth = self.headers.get("Authorization")
            status, answer, headers = fake.dispatch(self.command, parts.path, query, body, auth)
            data = json.dumps(answer).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _answer  # noqa: N815 (http.server's naming)

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

    return Handler
