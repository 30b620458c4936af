"""``POST /admin/alerts`` on the admin listener (bearer token): the Alertmanager webhook
(v4) whose firing alerts roll back the release they name
(:meth:`~infra.gateway.admin.Admin.alerts`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request

from infra.gateway.parts import ADMIN_ONLY, Parts

router = APIRouter(prefix="/admin", dependencies=ADMIN_ONLY)


@router.post("/alerts")
async def post_alerts(request: Request, p: Parts) -> dict[str, Any]:
    """An Alertmanager webhook (v4): what its firing alerts rolled back."""
    try:
        payload = await request.json()
    except ValueError as exc:
        raise HTTPException(400, "body is not JSON") from exc
    return await p.admin.alerts(payload)
