"""The gateway's two FastAPI apps: the public one (OpenAI-compatible endpoints, feedback,
metrics without the versions no user was routed to, health) and the admin one (``/admin/*``,
every metric included, served on its own listener, see :mod:`infra.gateway.serve`). Both are
assembled here from the routers of :mod:`infra.gateway.routes` and one set of parts
(:mod:`infra.gateway.parts`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response

from infra.gateway.chat import error_response
from infra.gateway.parts import GatewayParts, Intervals, attach, build_parts, lifespan
from infra.gateway.routes import ADMIN, PUBLIC
from infra.gateway.secret_checks import check_admin_token, check_user_salt

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.gateway.tracing import TraceSink
    from infra.settings import Settings
    from infra.store import ObjectStore
    from infra.upstream.upstreams import Upstream

# FastAPI's native OpenTelemetry would trace every HTTP request into whatever provider is
# global (the Langfuse SDK installs one): traces here are flywheel's own, so it stays off
_TELEMETRY: Any = {"tracing": False, "metrics": False, "logs": False}


def create_app(
    settings: Settings,
    *,
    store: ObjectStore | None = None,
    upstreams: dict[str, Upstream] | None = None,
    catalog: Catalog | None = None,
    on_rollback: Callable[..., None] | None = None,
    sink: TraceSink | None = None,
    intervals: Intervals | None = None,
    seed: int | None = None,
) -> FastAPI:
    """Build the gateway. ``store`` defaults to the configured object store (routing state and
    spool), ``upstreams`` override the configured ones per version, ``catalog`` receives audit
    events (default: the configured catalog, opened on first use), ``sink`` replaces the
    configured trace sink, ``on_rollback(reason, **release)`` (``version``, ``release_id``,
    ``workload`` of the release rolled back) replaces asking Prefect to run the rollback
    deployment after a rollback (it runs in a background thread), ``intervals`` set how often
    the routing state is re-read and traces are flushed (default: every 0.5 s and 1 s), ``seed``
    seeds the shadow and diverse sampling draws. The admin API's app is
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
    parts = build_parts(
        settings,
        store,
        upstreams=upstreams,
        catalog=catalog,
        on_rollback=on_rollback,
        sink=sink,
        intervals=intervals or Intervals(),
        seed=seed,
    )
    # the public listener: no schema, no docs, no admin routes (those are on the admin app)
    app = _app(parts, PUBLIC, title="flywheel gateway", lifespan=lifespan, openapi_url=None)
    app.state.admin_app = _app(
        parts, ADMIN, title="flywheel gateway admin", openapi_url="/admin/openapi.json"
    )
    return app


def _app(parts: GatewayParts, routers: tuple[APIRouter, ...], **options: Any) -> FastAPI:
    """One listener's app: ``routers`` over ``parts``, no docs pages, no telemetry."""
    app = FastAPI(docs_url=None, redoc_url=None, telemetry=_TELEMETRY, **options)
    attach(app, parts)
    for router in routers:
        app.include_router(router)
    app.add_exception_handler(RecursionError, _too_deep)
    return app


async def _too_deep(_request: Request, _exc: Exception) -> Response:
    """A body nested too deep for the JSON parser: the client's error, not the server's."""
    return error_response(400, "the body is nested too deeply", kind="invalid_request_error")
