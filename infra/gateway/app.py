"""The gateway's FastAPI app: OpenAI-compatible endpoints, feedback, metrics, health, admin."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from starlette.responses import Response

from infra.gateway.admin import Admin, admin_router
from infra.gateway.chat import BadRequest, error_response, json_response, parse_chat_request
from infra.gateway.metrics import GatewayMetrics
from infra.gateway.routing import ROUTED_MODEL, StateWatcher
from infra.gateway.service import Gateway
from infra.gateway.tracing import TraceDispatcher, TraceSink, open_sink
from infra.gateway.upstreams import Upstream, UpstreamPool
from infra.traces import FeedbackEvent

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    *,
    store: ObjectStore | None = None,
    upstreams: dict[str, Upstream] | None = None,
    catalog: Catalog | None = None,
    on_rollback: Callable[[str], None] | None = None,
    sink: TraceSink | None = None,
    state_interval_s: float = 0.5,
    flush_interval_s: float = 1.0,
    seed: int | None = None,
) -> FastAPI:
    """Build the gateway. ``store`` defaults to the configured object store (routing state and
    spool), ``upstreams`` override the configured ones per version, ``catalog`` receives audit
    events (default: the configured catalog, opened on first use), ``sink`` replaces the
    configured trace sink, ``on_rollback(reason)`` replaces asking Prefect to run the rollback
    deployment after a rollback (it runs in a background thread)."""
    if store is None:
        from infra.store import open_store

        store = open_store(settings)
    metrics = GatewayMetrics()
    watcher = StateWatcher(store, interval_s=state_interval_s, on_change=metrics.set_routing)
    metrics.set_routing(watcher.state)
    dispatcher = TraceDispatcher(
        sink or open_sink(settings, store),
        maxsize=settings.gateway.trace_queue_size,
        dropped=metrics.sink_dropped,
        flush_interval_s=flush_interval_s,
    )
    pool = UpstreamPool(settings, store, overrides=upstreams)
    gateway = Gateway(
        settings=settings,
        watcher=watcher,
        pool=pool,
        metrics=metrics,
        dispatcher=dispatcher,
        rng=random.Random(seed),
    )
    admin = Admin(
        settings=settings, store=store, watcher=watcher, catalog=catalog, on_rollback=on_rollback
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(watcher.refresh)
        poller = asyncio.create_task(watcher.run(), name="routing-state")
        dispatcher.start()
        admin.warm_up()
        preload = asyncio.create_task(pool.preload(watcher.state.stable), name="preload")
        try:
            yield
        finally:
            preload.cancel()
            poller.cancel()
            await gateway.drain()
            await dispatcher.stop()
            await pool.aclose()

    # FastAPI's native OpenTelemetry would trace every HTTP request into whatever provider is
    # global (the Langfuse SDK installs one): traces here are flywheel's own, so it stays off
    telemetry: Any = {"tracing": False, "metrics": False, "logs": False}
    app = FastAPI(
        title="flywheel gateway",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        telemetry=telemetry,
    )
    app.state.gateway = gateway
    app.state.admin = admin
    app.include_router(admin_router(admin))

    # the hot path is a plain Starlette route: no dependency solving per request
    async def chat_completions(request: Request) -> Response:
        try:
            body = await request.json()
            req = parse_chat_request(
                body,
                session_header=request.headers.get("x-session-id"),
                default_max_tokens=settings.gateway.max_new_tokens,
            )
        except (BadRequest, ValueError) as exc:
            message = str(exc) if isinstance(exc, BadRequest) else "the body is not valid JSON"
            return error_response(400, message, kind="invalid_request_error")
        return await gateway.chat(req)

    app.add_route("/v1/chat/completions", chat_completions, methods=["POST"])

    @app.get("/v1/models")
    async def models() -> Response:
        state = watcher.state
        names = [ROUTED_MODEL, state.stable]
        cand = state.routable_candidate()
        names += ([cand] if cand else []) + pool.configured()
        unique = list(dict.fromkeys(names))
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "flywheel"} for n in unique]
        return json_response({"object": "list", "data": data})

    async def feedback(request: Request) -> Response:
        try:
            event, model = _parse_feedback(await request.json(), gateway)
        except ValueError as exc:
            return error_response(400, str(exc), kind="invalid_request_error")
        dispatcher.submit_feedback(event)
        metrics.feedback.labels(model, str(event.value)).inc()
        return json_response({"status": "accepted", "trace_id": event.trace_id}, status=202)

    app.add_route("/v1/feedback", feedback, methods=["POST"])

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        state = watcher.state
        return {
            "status": "ok",
            "stable": state.stable,
            "candidate": state.routable_candidate(),
            "weight": state.weight,
            "phase": state.phase,
        }

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return app


def _parse_feedback(body: Any, gateway: Gateway) -> tuple[FeedbackEvent, str]:
    """(event, model label) from ``{trace_id, value: 1|0|-1, comment?}``."""
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    trace_id = body.get("trace_id")
    value = body.get("value")
    comment = body.get("comment")
    if not isinstance(trace_id, str) or not 0 < len(trace_id) <= 128:
        raise ValueError("'trace_id' must be a non-empty string")
    if isinstance(value, bool) or value not in (1, 0, -1):
        raise ValueError("'value' must be 1, 0 or -1")
    if comment is not None and not isinstance(comment, str):
        raise ValueError("'comment' must be a string")
    event = FeedbackEvent(
        trace_id=trace_id,
        value=int(value),  # type: ignore[arg-type]
        at=datetime.now(UTC),
        comment=comment[:2000] if comment else None,
    )
    # only versions this gateway served become labels (a client string would explode cardinality)
    model = gateway.recorder.trace_models.get(trace_id, "unknown")
    return event, model
