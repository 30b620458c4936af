"""The admin listener's routing control (bearer token): ``GET``/``POST /admin/state`` and
``POST /admin/rollback`` (:class:`~infra.gateway.admin.Admin` does the work); and
:data:`elsewhere`, what ``/admin/*`` answers on the public listener (the admin API is not
there)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from infra.gateway.admin import ADMIN_OFF, RollbackRequest
from infra.gateway.chat import error_response
from infra.gateway.parts import ADMIN_ONLY, Parts, parts
from infra.routing import StateChange

router = APIRouter(prefix="/admin", dependencies=ADMIN_ONLY)


@router.get("/state")
async def get_state(p: Parts) -> dict[str, Any]:
    """The routing state this gateway routes by."""
    return p.watcher.state.model_dump(mode="json")


@router.post("/state")
async def post_state(change: StateChange, p: Parts) -> dict[str, Any]:
    """Apply one transition (compare-and-swap); 409 on a revision conflict or a rejected
    version."""
    return (await p.admin.update(change)).model_dump(mode="json")


@router.post("/rollback")
async def post_rollback(body: RollbackRequest, p: Parts) -> dict[str, Any]:
    """Roll back now: whether anything was rolled back, and the state."""
    done, state = await p.admin.rollback(
        reason=body.reason,
        actor=body.actor,
        evidence=body.evidence or None,
        version=body.version,
        release_id=body.release_id,
        candidate_only=body.candidate_only,
        workload=body.workload,
    )
    return {"rolled_back": done, "state": state.model_dump(mode="json")}


elsewhere = APIRouter()


async def admin_elsewhere(request: Request) -> Response:
    """``/admin/*`` on the public listener: 404 naming the admin port (503 while the admin
    API is off)."""
    if not parts(request).admin.enabled:
        return error_response(503, ADMIN_OFF, kind="admin_disabled")
    return error_response(
        404,
        "not found: the admin API listens on its own port (FLYWHEEL_GATEWAY__ADMIN_PORT)",
        kind="not_found",
    )


elsewhere.add_route("/admin/{rest:path}", admin_elsewhere, methods=["GET", "POST"])
