"""Size limits at the edge: request bodies (413 before anything is parsed or traced) and trace
records (text cut to ``max_trace_chars`` per field, the cut counted, never logged)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyLimit:
    """ASGI middleware: a request whose body is over ``max_bytes`` gets 413 (OpenAI error
    shape) without reaching the app. A declared ``Content-Length`` is checked before anything
    is read; a chunked body is read up to the limit and handed on only if it fits."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            if declared.strip().isdigit() and int(declared) > self.max_bytes:
                await self._reject(send)
                return
            await self.app(scope, receive, send)  # the HTTP parser stops at the declared length
            return
        if b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body at all
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._reject(send)
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # e.g. a streaming response waiting for a disconnect
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _reject(self, send: Send) -> None:
        error = {
            "message": f"request body over {self.max_bytes} bytes "
            "(the gateway's limit, FLYWHEEL_GATEWAY__MAX_BODY_BYTES)",
            "type": "invalid_request_error",
            "param": None,
            "code": "request_too_large",
        }
        data = json.dumps({"error": error}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": data, "more_body": False})


def cap_trace(fields: dict[str, Any], max_chars: int) -> bool:
    """Cut ``question`` and ``answer`` to ``max_chars`` each, ``contexts`` to ``max_chars`` in
    all (later ones dropped), and drop ``tool_calls`` larger than that; True if anything was
    cut. Keeps a trace under the size collect accepts (``FLYWHEEL_MAX_RECORD_BYTES``)."""
    cut = False
    for key in ("question", "answer"):
        text = fields.get(key) or ""
        if len(text) > max_chars:
            fields[key], cut = text[:max_chars], True
    contexts = fields.get("contexts") or []
    if sum(len(c) for c in contexts) > max_chars:
        kept, left = [], max_chars
        for context in contexts:
            if left <= 0:
                break
            kept.append(context[:left])
            left -= len(kept[-1])
        fields["contexts"], cut = kept, True
    tool_calls = fields.get("tool_calls")
    if tool_calls and _json_len(tool_calls) > max_chars:
        fields["tool_calls"], cut = [], True
    return cap_messages(fields, max_chars) or cut


def cap_messages(fields: dict[str, Any], max_chars: int) -> bool:
    """Cut each message's text to ``max_chars`` and, while the conversation is over four times
    that, drop its oldest turns after the system prompt (the last user turn always stays)."""
    messages = fields.get("messages")
    if not messages:
        return False
    cut = False
    capped = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and len(content) > max_chars:
            message, cut = {**message, "content": content[:max_chars]}, True
        capped.append(message)
    while _json_len(capped) > 4 * max_chars:
        first = next((i for i, m in enumerate(capped) if m.get("role") != "system"), None)
        if first is None or first >= len(capped) - 1:
            break
        del capped[first]
        cut = True
    if cut:
        fields["messages"] = capped
    return cut


def _json_len(value: Any) -> int:
    """Characters of ``value`` as JSON (orjson: UTF-8 bytes; a few times cheaper per trace)."""
    return len(orjson.dumps(value, default=str))
