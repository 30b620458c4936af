"""Health and metrics: ``GET /healthz``, ``GET /livez`` and the public ``GET /metrics`` on
the public listener; :data:`admin_router`'s ``GET /admin/metrics`` (bearer token, every
series) on the admin listener."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from infra.gateway.chat import json_response
from infra.gateway.parts import ADMIN_ONLY, Parts

EXPOSITION = "text/plain; version=0.0.4; charset=utf-8"

router = APIRouter()


@router.get("/healthz")
async def healthz(p: Parts) -> Response:
    """200 while the stable version can be served; 503 with the reason otherwise. Names the
    stable version only: a candidate, its weight and the release's phase are the admin
    listener's (``/admin/state``), so no public caller can aim votes at a canary."""
    state = p.watcher.state
    reason = await p.pool.check(state.stable)
    body: dict[str, Any] = {
        "status": "ok" if reason is None else "unhealthy",
        "stable": state.stable,
    }
    if reason is not None:
        body["reason"] = reason
    return json_response(body, status=200 if reason is None else 503)


@router.get("/livez")
async def livez() -> Response:
    """The process is up and answering (whatever the models do)."""
    return json_response({"status": "ok"})


@router.get("/metrics")
async def prometheus_metrics(p: Parts) -> Response:
    """The public exposition: no route, no weight, no version but the stable ones."""
    return Response(p.metrics.render(public=True), media_type=EXPOSITION)


admin_router = APIRouter(prefix="/admin", dependencies=ADMIN_ONLY)


@admin_router.get("/metrics")
async def all_metrics(p: Parts) -> Response:
    """Every series (what Prometheus scrapes: the alert rules read shadow errors)."""
    return Response(p.metrics.render(), media_type=EXPOSITION)
