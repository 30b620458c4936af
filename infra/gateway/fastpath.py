"""``POST /v1/chat/completions``, the one route on every user's path, without the framework.

The public FastAPI app keeps the route (tests and the admin app see the same behaviour), but
the server hands this route's requests straight to :meth:`ChatEndpoint.asgi`
(:func:`infra.gateway.asgi.by_port`): no router walk, no middleware stack, no exception
middleware per request; the same handler answers either way. Bodies are parsed with orjson.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request

from infra.gateway.chat import error_response
from infra.gateway.chat_request import MAX_DEPTH, BadRequest, ChatLimits, parse_chat_request
from infra.gateway.json_shape import body_shape_problem
from infra.gateway.keyring import Caller, Refusal, refusal_response, workload_refusal
from infra.gateway.requester import ClientResolver, tenant_of
from infra.traces.conversation import WORKLOAD_HEADER

if TYPE_CHECKING:
    from starlette.responses import Response

    from infra.gateway.admin import Admin
    from infra.gateway.keyring import KeyRing
    from infra.gateway.service import Gateway

CHAT_PATH = "/v1/chat/completions"
PRECHECK_BYTES = 64 * 1024  # bodies above this have their message count estimated first
_WORKLOAD = WORKLOAD_HEADER.lower()  # header lookups here take lower-case names
ADMIN_ONLY = Refusal(
    401,
    "missing or wrong bearer token (the admin token)",
    "invalid_request_error",
    "invalid_api_key",
)


class ChatEndpoint:
    """Parses a chat request and hands it to the :class:`~infra.gateway.service.Gateway`.

    On the public listener (``keys``: the client keys) a caller is checked against the keys
    before its body is read (:mod:`infra.gateway.keyring`); the admin token is no credential
    there (it is a client like any other, refused in keyed mode). On the admin listener
    (``keys`` None) only the admin token is accepted: it may name any version that is not
    retired and sees which version and route answered."""

    def __init__(self, *, gateway: Gateway, admin: Admin, keys: KeyRing | None = None) -> None:
        self.gateway = gateway
        self.admin = admin
        self.keys = keys
        gw = gateway.settings.gateway
        self.limits = ChatLimits.from_settings(gateway.settings)
        self.clients = ClientResolver(gw.trusted_proxies, header=gw.client_header)

    def caller(self, authorization: str | None) -> Caller | Refusal:
        """Who shows ``authorization`` here: a client key on the public listener, the admin
        token on the admin listener (:mod:`infra.gateway.keyring`)."""
        if self.keys is None:  # the admin listener: the admin token or nothing
            return Caller() if self.admin.shows_bearer(authorization or "") else ADMIN_ONLY
        return self.keys.check(authorization)

    async def handle(
        self,
        body: bytes,
        header: Callable[[str], str | None],
        client: str | None = None,
        caller: Caller | None = None,
    ) -> Response:
        """The handler: the request's body, a lookup of its headers (lower-case names) and its
        client's address (:mod:`infra.gateway.requester`: the key of a request without a user
        or session, for routing and voice alike); ``caller``: already checked (else it is
        checked here)."""
        authorization = header("authorization")
        if caller is None:
            checked = self.caller(authorization)
            if isinstance(checked, Refusal):
                return refusal_response(checked)
            caller = checked
        if len(body) > PRECHECK_BYTES and body.count(b'"role"') > 2 * self.limits.max_messages:
            # far more messages than allowed: refused before parsing, which alone would hold
            # the event loop for a 4 MiB body of tiny messages
            return error_response(
                400,
                f"more than {self.limits.max_messages} messages (FLYWHEEL_GATEWAY__MAX_MESSAGES)",
                kind="invalid_request_error",
            )
        # nesting and size of structure measured on the bytes (off the loop for a large
        # body): parsing is what a body of a million tiny lists costs
        if why := await body_shape_problem(body, max_depth=MAX_DEPTH):
            return error_response(400, why, kind="invalid_request_error")
        try:
            req = parse_chat_request(
                orjson.loads(body),
                limits=self.limits,
                session_header=header("x-session-id"),
                workload_header=header(_WORKLOAD),
                shape_checked=True,
            )
        except BadRequest as exc:
            return error_response(400, str(exc), kind="invalid_request_error")
        except ValueError:  # orjson.JSONDecodeError is one
            return error_response(400, "the body is not valid JSON", kind="invalid_request_error")
        if caller.key is not None and caller.key.workloads:
            named = req.workload is not None or req.unconfigured_workload
            if refused := workload_refusal(caller, req.workload, named=named):
                return refusal_response(refused)
            if req.workload is None:  # the key's own workload, when it is configured
                req.workload = next(
                    (w for w in caller.key.workloads if w in self.limits.workloads), None
                )
        req.client, req.tenant, req.quota = client, tenant_of(authorization), caller.quota
        if req.unconfigured_workload:
            self.gateway.recorder.metrics.workload_unconfigured.inc()
        return await self.gateway.chat(req, admin=self.keys is None)

    async def route(self, request: Request) -> Response:
        """The same handler as a plain Starlette route (no dependency solving per request)."""
        peer = request.client.host if request.client else None
        client = self.clients.resolve(peer, request.headers.getlist(self.clients.header))
        return await self.handle(await request.body(), request.headers.get, client)

    async def asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The same handler as a bare ASGI app (the server's fast path for this route): the
        body read from ``receive``, the headers looked up in the scope, no Request object."""
        headers: dict[bytes, bytes] = dict(scope["headers"])

        def header(name: str) -> str | None:
            value = headers.get(name.encode("latin-1"))
            return None if value is None else value.decode("latin-1")

        # the caller before its body: a refused one never has its body buffered
        checked = self.caller(header("authorization"))
        if isinstance(checked, Refusal):
            await refusal_response(checked)(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body arrived
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        peer = scope["client"][0] if scope.get("client") else None
        if self.clients.enabled:  # the header's every instance, in order
            name = self.clients.header_bytes
            forwarded = [v.decode("latin-1") for k, v in scope["headers"] if k == name]
            client = self.clients.resolve(peer, forwarded)
        else:
            client = peer
        response = await self.handle(b"".join(chunks), header, client, checked)
        await response(scope, receive, send)

    @staticmethod
    def matches(scope: dict[str, Any]) -> bool:
        """Whether an ASGI scope is a ``POST`` to the chat completions path."""
        return scope["type"] == "http" and scope["path"] == CHAT_PATH and scope["method"] == "POST"
