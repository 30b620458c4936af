"""The ASGI stack both ways of serving the gateway share (one process, or workers on the same
sockets): the server's event loop and parser, and the one app that splits the listeners."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from infra.gateway.limits import BodyLimit

if TYPE_CHECKING:
    from fastapi import FastAPI

# uvloop's event loop and the httptools HTTP parser (uvicorn[standard]): both in C. uvicorn's
# proxy-header rewrite is off: it trusts X-Forwarded-For from loopback by default; the gateway
# reads the client from FLYWHEEL_GATEWAY__TRUSTED_PROXIES alone (infra.gateway.requester)
SERVER_STACK: dict[str, Any] = {"loop": "uvloop", "http": "httptools", "proxy_headers": False}


def by_port(app: FastAPI, sockets: list[socket.socket]) -> Any:
    """One ASGI app for both listeners: a connection that arrived on the admin socket (the
    second, if any) goes to ``app.state.admin_app``, every other one to ``app``; request
    bodies over ``FLYWHEEL_GATEWAY__MAX_BODY_BYTES`` are refused (413) on both."""
    admin_port = sockets[1].getsockname()[1] if len(sockets) > 1 else None
    admin_app = app.state.admin_app
    max_bytes = app.state.gateway.settings.gateway.max_body_bytes
    chat = app.state.parts.chat

    async def root(scope: dict[str, Any], receive: Any, send: Any) -> None:
        server = scope.get("server") or (None, None)
        if admin_port is not None and scope["type"] == "http" and server[1] == admin_port:
            await admin_app(scope, receive, send)
        elif chat.matches(scope):
            await chat.asgi(scope, receive, send)  # the hot path skips the framework
        else:
            await app(scope, receive, send)

    return BodyLimit(root, max_bytes=max_bytes)
