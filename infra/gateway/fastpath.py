"""``POST /v1/chat/completions``, the one route on every user's path, without the framework.

The public FastAPI app keeps the route (tests and the admin app see the same behaviour), but
the server hands this route's requests straight to :meth:`ChatEndpoint.asgi`
(:func:`infra.gateway.asgi.by_port`): no router walk, no middleware stack, no exception
middleware per request; the same handler answers either way. Bodies are parsed with orjson.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request

from infra.gateway.admin import ADMIN_HEADER
from infra.gateway.chat import BadRequest, error_response, parse_chat_request

if TYPE_CHECKING:
    from starlette.responses import Response

    from infra.gateway.admin import Admin
    from infra.gateway.service import Gateway

CHAT_PATH = "/v1/chat/completions"


class ChatEndpoint:
    """Parses a chat request and hands it to the :class:`~infra.gateway.service.Gateway`."""

    def __init__(self, *, gateway: Gateway, admin: Admin, default_max_tokens: int) -> None:
        self.gateway = gateway
        self.admin = admin
        self.default_max_tokens = default_max_tokens

    async def route(self, request: Request) -> Response:
        """The handler (a plain Starlette route: no dependency solving per request)."""
        try:
            body = orjson.loads(await request.body())
            req = parse_chat_request(
                body,
                session_header=request.headers.get("x-session-id"),
                workload_header=request.headers.get("x-flywheel-workload"),
                default_max_tokens=self.default_max_tokens,
            )
        except BadRequest as exc:
            return error_response(400, str(exc), kind="invalid_request_error")
        except ValueError:  # orjson.JSONDecodeError is one
            return error_response(400, "the body is not valid JSON", kind="invalid_request_error")
        admin = self.admin.enabled and self.admin.shows_token(request, ADMIN_HEADER)
        return await self.gateway.chat(req, admin=admin)

    async def asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The same handler as a bare ASGI app (the server's fast path for this route)."""
        response = await self.route(Request(scope, receive))
        await response(scope, receive, send)

    @staticmethod
    def matches(scope: dict[str, Any]) -> bool:
        return scope["type"] == "http" and scope["path"] == CHAT_PATH and scope["method"] == "POST"
