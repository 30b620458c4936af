"""The gateway's two FastAPI apps: the public one (OpenAI-compatible endpoints, feedback,
metrics without the versions no user was routed to, health) and the admin one (``/admin/*``,
every metric included, served on its own listener, see :mod:`infra.gateway.serve`)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from starlette.responses import Response

from infra.gateway.admin import ADMIN_OFF, Admin, admin_router
from infra.gateway.chat import error_response, json_response
from infra.gateway.fastpath import CHAT_PATH, ChatEndpoint
from infra.gateway.feedback import FeedbackDesk, TraceIds
from infra.gateway.metrics import GatewayMetrics
from infra.gateway.routing import ROUTED_MODEL, StateWatcher
from infra.gateway.secret_checks import check_admin_token, check_user_salt
from infra.gateway.service import Gateway, retired_versions
from infra.gateway.tracing import TraceDispatcher, TraceSink, open_sink
from infra.gateway.voices import epoch_of
from infra.upstream.upstreams import Upstream, UpstreamPool

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

EXPOSITION = "text/plain; version=0.0.4; charset=utf-8"


def create_app(
    settings: Settings,
    *,
    store: ObjectStore | None = None,
    upstreams: dict[str, Upstream] | None = None,
    catalog: Catalog | None = None,
    on_rollback: Callable[..., None] | None = None,
    sink: TraceSink | None = None,
    state_interval_s: float = 0.5,
    flush_interval_s: float = 1.0,
    seed: int | None = None,
) -> FastAPI:
    """Build the gateway. ``store`` defaults to the configured object store (routing state and
    spool), ``upstreams`` override the configured ones per version, ``catalog`` receives audit
    events (default: the configured catalog, opened on first use), ``sink`` replaces the
    configured trace sink, ``on_rollback(reason, **release)`` (``version``, ``release_id``,
    ``workload`` of the release rolled back) replaces asking Prefect to run the rollback
    deployment after a rollback (it runs in a background thread). The admin API's app is
    ``app.state.admin_app``.

    Raises:
        ConfigError: the admin token or the user salt is a placeholder or too short, or an
            upstream's key cannot be read.
    """
    check_admin_token(settings.gateway.admin_token)
    check_user_salt(settings.user_salt)
    if store is None:
        from infra.store import open_store

        store = open_store(settings)
    metrics = GatewayMetrics(voices_per_step=settings.gateway.voices_per_step)
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
        trace_ids=TraceIds(settings.salt()),
        rng=random.Random(seed),
    )
    admin = Admin(
        settings=settings, store=store, watcher=watcher, catalog=catalog, on_rollback=on_rollback
    )
    feedback = FeedbackDesk(
        trace_ids=gateway.recorder.trace_ids,
        metrics=metrics,
        dispatcher=dispatcher,
        trace_models=gateway.recorder.trace_models,
        epoch=lambda line: epoch_of(watcher.view(line)),
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
    # the public listener: no schema, no docs, no admin routes (those are on the admin app)
    app = FastAPI(
        title="flywheel gateway",
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        telemetry=telemetry,
    )
    app.state.gateway = gateway
    app.state.admin = admin
    app.state.admin_app = _admin_app(admin, telemetry)

    # the hot path: a plain Starlette route here, and straight from the server (asgi.by_port)
    chat = ChatEndpoint(gateway=gateway, admin=admin)
    app.state.chat_endpoint = chat
    app.add_route(CHAT_PATH, chat.route, methods=["POST"])

    @app.get("/v1/models")
    async def models() -> Response:
        """What a public client may name: the routed model and the stable version, while the
        stable version can be served (none before `flywheel bootstrap`)."""
        state = watcher.state
        servable = state.stable not in retired_versions(state)
        servable = servable and await pool.check(state.stable) is None
        names = [ROUTED_MODEL, state.stable] if servable else []
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "flywheel"} for n in names]
        return json_response({"object": "list", "data": data})

    app.add_route("/v1/feedback", feedback.handle, methods=["POST"])

    @app.get("/healthz")
    async def healthz() -> Response:
        """200 while the stable version can be served; 503 with the reason otherwise."""
        state = watcher.state
        reason = await pool.check(state.stable)
        cand = state.routable_candidate()
        body: dict[str, Any] = {
            "status": "ok" if reason is None else "unhealthy",
            "stable": state.stable,
            # named only while it is public (the canary); never an internal address
            "candidate": cand if cand and state.weight > 0 else None,
            "weight": state.weight,
            "phase": state.phase,
        }
        if reason is not None:
            body["reason"] = reason
        return json_response(body, status=200 if reason is None else 503)

    @app.get("/livez")
    async def livez() -> Response:
        """The process is up and answering (whatever the models do)."""
        return json_response({"status": "ok"})

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        """The public exposition: no series of a version no public client was routed to."""
        return Response(metrics.render(public=True), media_type=EXPOSITION)

    @app.state.admin_app.get("/admin/metrics", dependencies=[Depends(admin.authorize)])
    async def all_metrics() -> Response:
        """Every series (what Prometheus scrapes: the alert rules read shadow errors)."""
        return Response(metrics.render(), media_type=EXPOSITION)

    async def admin_elsewhere(request: Request) -> Response:
        if not admin.enabled:
            return error_response(503, ADMIN_OFF, kind="admin_disabled")
        return error_response(
            404,
            "not found: the admin API listens on its own port (FLYWHEEL_GATEWAY__ADMIN_PORT)",
            kind="not_found",
        )

    app.add_route("/admin/{rest:path}", admin_elsewhere, methods=["GET", "POST"])
    app.add_exception_handler(RecursionError, _too_deep)
    return app


def _admin_app(admin: Admin, telemetry: Any) -> FastAPI:
    """The admin listener's app: ``/admin/*`` (bearer token) and its OpenAPI schema."""
    app = FastAPI(
        title="flywheel gateway admin",
        openapi_url="/admin/openapi.json",
        docs_url=None,
        redoc_url=None,
        telemetry=telemetry,
    )
    app.state.admin = admin
    app.include_router(admin_router(admin))
    app.add_exception_handler(RecursionError, _too_deep)
    return app


async def _too_deep(_request: Request, _exc: Exception) -> Response:
    """A body nested too deep for the JSON parser: the client's error, not the server's."""
    return error_response(400, "the body is nested too deeply", kind="invalid_request_error")
