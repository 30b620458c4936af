"""The OpenAI-compatible endpoints: ``POST /v1/chat/completions`` (a plain Starlette route to
:class:`~infra.gateway.fastpath.ChatEndpoint`: the server usually hands its requests to the
endpoint before any router, see :func:`infra.gateway.asgi.by_port`) and ``GET /v1/models``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from infra.gateway.chat import json_response
from infra.gateway.fastpath import CHAT_PATH
from infra.gateway.parts import Parts, parts
from infra.gateway.routing import ROUTED_MODEL
from infra.gateway.service import retired_versions

router = APIRouter()


async def chat_completions(request: Request) -> Response:
    """A chat completion (no dependency solving per request)."""
    return await parts(request).chat.route(request)


router.add_route(CHAT_PATH, chat_completions, methods=["POST"])


@router.get("/v1/models")
async def models(p: Parts) -> Response:
    """What a public client may name: the routed model and the stable version, while the
    stable version can be served (none before `flywheel bootstrap`)."""
    state = p.watcher.state
    servable = state.stable not in retired_versions(state)
    servable = servable and await p.pool.check(state.stable) is None
    names = [ROUTED_MODEL, state.stable] if servable else []
    data = [{"id": n, "object": "model", "created": 0, "owned_by": "flywheel"} for n in names]
    return json_response({"object": "list", "data": data})
