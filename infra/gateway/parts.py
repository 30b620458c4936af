"""The gateway's parts, built once per app by :func:`build_parts` and reached by every route
through ``app.state.parts`` (:func:`parts`, or the FastAPI dependency :data:`Parts`): the
routes in :mod:`infra.gateway.routes` are plain functions, not closures over the parts.
:func:`lifespan` starts and stops what runs in the background."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, cast

from fastapi import Depends, Request

from infra.gateway.admin import Admin
from infra.gateway.aio import run_in_daemon_thread
from infra.gateway.cohorts import StateWatcher
from infra.gateway.fastpath import ChatEndpoint
from infra.gateway.feedback import FeedbackDesk, TraceIds
from infra.gateway.keyring import KeyRing
from infra.gateway.metrics import GatewayMetrics
from infra.gateway.requester import routing_secret
from infra.gateway.service import Gateway
from infra.gateway.tracing import TraceDispatcher, TraceSink, open_sink
from infra.gateway.voices import epoch_of
from infra.upstream.upstreams import Upstream, UpstreamPool

if TYPE_CHECKING:
    from fastapi import FastAPI
    from pyiceberg.catalog import Catalog

    from infra.settings import Settings
    from infra.store import ObjectStore


@dataclass(frozen=True, kw_only=True)
class GatewayParts:
    """What the routes and the lifespan work with (one set per app)."""

    gateway: Gateway
    admin: Admin
    chat: ChatEndpoint  # the public listener's (client keys)
    admin_chat: ChatEndpoint  # the admin listener's (the admin token)
    keys: KeyRing
    feedback: FeedbackDesk
    watcher: StateWatcher
    pool: UpstreamPool
    metrics: GatewayMetrics
    dispatcher: TraceDispatcher


def parts(request: Request) -> GatewayParts:
    """The parts of the app that received ``request``."""
    return cast(GatewayParts, request.app.state.parts)


Parts = Annotated[GatewayParts, Depends(parts)]
"""The parts, as a route's parameter (``def route(p: Parts)``)."""


def authorize(request: Request) -> None:
    """The admin routes' dependency: ``Authorization: Bearer <admin token>``
    (:meth:`~infra.gateway.admin.Admin.authorize`).

    Raises:
        HTTPException: 503 while the admin API is off, 401 without the token.
    """
    parts(request).admin.authorize(request)


ADMIN_ONLY = [Depends(authorize)]
"""The dependencies of every admin router."""


@dataclass(frozen=True, kw_only=True)
class Intervals:
    """How often the gateway works in the background (seconds): ``state_s``, the routing
    state re-read (and client keys, and where versions are served); ``flush_s``, queued
    traces written at most this long after the first of them arrives."""

    state_s: float = 0.5
    flush_s: float = 1.0


def build_parts(
    settings: Settings,
    store: ObjectStore,
    *,
    upstreams: dict[str, Upstream] | None,
    catalog: Catalog | None,
    on_rollback: Callable[..., None] | None,
    sink: TraceSink | None,
    intervals: Intervals,
    seed: int | None,
) -> GatewayParts:
    """The parts (see :func:`~infra.gateway.app.create_app` for the arguments)."""
    metrics = GatewayMetrics(voices_per_step=settings.gateway.voices_per_step)
    watcher = StateWatcher(store, interval_s=intervals.state_s, on_change=metrics.set_routing)
    metrics.set_routing(watcher.state)
    dispatcher = TraceDispatcher(
        sink or open_sink(settings, store),
        maxsize=settings.gateway.trace_queue_size,
        max_bytes=settings.gateway.trace_queue_bytes,
        dropped=metrics.sink_dropped,
        flush_interval_s=intervals.flush_s,
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
        routing_secret=routing_secret(settings.salt()),
    )
    admin = Admin(
        settings=settings, store=store, watcher=watcher, catalog=catalog, on_rollback=on_rollback
    )
    keys = KeyRing(store, settings.gateway)
    feedback = FeedbackDesk(
        keys=keys,
        trace_ids=gateway.recorder.trace_ids,
        metrics=metrics,
        dispatcher=dispatcher,
        trace_models=gateway.recorder.trace_models,
        epoch=lambda line: epoch_of(watcher.view(line)),
    )
    return GatewayParts(
        gateway=gateway,
        admin=admin,
        chat=ChatEndpoint(gateway=gateway, admin=admin, keys=keys),
        admin_chat=ChatEndpoint(gateway=gateway, admin=admin),
        keys=keys,
        feedback=feedback,
        watcher=watcher,
        pool=pool,
        metrics=metrics,
        dispatcher=dispatcher,
    )


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The public app's lifespan: the routing state polled, traces dispatched, the audit
    catalog and the stable version's upstream warmed up; all stopped (requests in flight
    drained) at shutdown."""
    p: GatewayParts = app.state.parts
    await asyncio.to_thread(p.watcher.refresh)
    poller = asyncio.create_task(p.watcher.run(), name="routing-state")
    if not p.keys.loaded:
        await asyncio.to_thread(p.keys.refresh)
    keys = asyncio.create_task(p.keys.run(p.watcher.interval_s), name="client-keys")
    await asyncio.to_thread(p.pool.refresh_served)
    servers = asyncio.create_task(_watch_served(p), name="model-servers")
    p.dispatcher.start()
    p.admin.warm_up()
    preload = asyncio.create_task(p.pool.preload(p.watcher.state.stable), name="preload")
    try:
        yield
    finally:
        preload.cancel()
        poller.cancel()
        keys.cancel()
        servers.cancel()
        await p.gateway.drain()
        await asyncio.to_thread(p.admin.finish_background)
        await p.dispatcher.stop()
        await p.pool.aclose()


async def _watch_served(p: GatewayParts) -> None:
    """Re-read where versions on other bases' model servers are served (a release that starts
    a student's server records it there), as often as the routing state."""
    if not p.pool.settings.model_server.enabled:
        return
    while True:
        await asyncio.sleep(p.watcher.interval_s)
        await run_in_daemon_thread(p.pool.refresh_served)


def attach(app: FastAPI, p: GatewayParts) -> None:
    """Put ``p`` where the routes find it (``app.state.parts``), with the gateway and the
    admin as ``app.state.gateway`` / ``app.state.admin`` (the server and tests read those)."""
    app.state.parts = p
    app.state.gateway = p.gateway
    app.state.admin = p.admin
