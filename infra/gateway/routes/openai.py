"""The OpenAI-compatible endpoints: ``POST /v1/chat/completions`` (a plain Starlette route to
:class:`~infra.gateway.fastpath.ChatEndpoint`: the server usually hands its requests to the
endpoint before any router, see :func:`infra.gateway.asgi.by_port`) and ``GET /v1/models``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from infra.gateway.chat import json_response
from infra.gateway.cohorts import ROUTED_MODEL
from infra.gateway.fastpath import CHAT_PATH
from infra.gateway.keyring import Refusal, refusal_response
from infra.gateway.parts import Parts, parts
from infra.gateway.service import retired_versions

router = APIRouter()


async def chat_completions(request: Request) -> Response:
    """A chat completion (no dependency solving per request)."""
    return await parts(request).chat.route(request)


router.add_route(CHAT_PATH, chat_completions, methods=["POST"])

admin_router = APIRouter()
"""The admin listener's chat completions: the admin token only, any version not retired by
name, the answering version and route in the response headers."""


async def admin_chat_completions(request: Request) -> Response:
    """A chat completion for the operator."""
    return await parts(request).admin_chat.route(request)


admin_router.add_route(CHAT_PATH, admin_chat_completions, methods=["POST"])


@router.get("/v1/models")
async def models(request: Request, p: Parts) -> Response:
    """What a public client may name: the routed model and the stable version, while the
    stable version can be served (none before `flywheel bootstrap`); 401 without a client
    key in keyed mode."""
    checked = p.keys.check(request.headers.get("authorization"))
    if isinstance(checked, Refusal):
        return refusal_response(checked)
    state = p.watcher.state
    servable = state.stable not in retired_versions(state)
    servable = servable and await p.pool.check(state.stable) is None
    names = [ROUTED_MODEL, state.stable] if servable else []
    data = [{"id": n, "object": "model", "created": 0, "owned_by": "flywheel"} for n in names]
    return json_response({"object": "list", "data": data})
