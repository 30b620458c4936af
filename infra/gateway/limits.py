"""Size limits at the edge: request bodies (413 before anything is parsed or traced) and trace
records (text cut to ``max_trace_chars`` per field, the whole record to ten times that, the
cut counted, never logged)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

Scope = dict[str, Any]
AsgiMessage = dict[str, Any]
Receive = Callable[[], Awaitable[AsgiMessage]]
Send = Callable[[AsgiMessage], Awaitable[None]]
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

        async def replay() -> AsgiMessage:
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


RECORD_FACTOR = 10  # the whole serialised record is held under this many times max_chars
ID_CHARS = 256  # user, session and workload ids in a trace
_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


def cap_trace(fields: dict[str, Any], max_chars: int) -> bool:
    """:func:`capped_size` without the size: True if anything was cut."""
    return capped_size(fields, max_chars)[0]


def capped_size(fields: dict[str, Any], max_chars: int) -> tuple[bool, int]:
    """Hold one trace record under ``RECORD_FACTOR * max_chars`` characters of JSON, in time
    linear in its size; True if anything was cut. Every text (question, answer, each message's
    content or text part) is cut to ``max_chars``, the contexts to ``max_chars`` in all, tool
    calls and logprobs larger than that dropped; messages keep only their OpenAI keys (a part
    that is not text keeps only its type) and, beyond four times ``max_chars``, lose their
    oldest turns after the system prompt (the last one always stays). Keeps a trace under the
    size collect accepts (``FLYWHEEL_MAX_RECORD_BYTES``). Returns whether anything was cut, and
    the record's size in bytes of JSON (what it weighs in the trace queue)."""
    if (size := _json_len(fields)) <= max_chars:
        return False, size  # the common case: one serialisation, nothing to cut
    cut = False
    for key in ("user_id", "session_id", "workload"):
        value = fields.get(key)
        if isinstance(value, str) and len(value) > ID_CHARS:
            fields[key], cut = value[:ID_CHARS], True
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
    for key in ("tool_calls", "logprobs"):
        value = fields.get(key)
        if value and _json_len(value) > max_chars:
            fields[key], cut = [] if key == "tool_calls" else None, True
    cut = cap_messages(fields, max_chars) or cut
    if (size := _json_len(fields)) > RECORD_FACTOR * max_chars:  # only a tiny max_chars
        fields["messages"], fields["contexts"], cut = [], [], True
        size = _json_len(fields)
    return cut, size


def cap_messages(fields: dict[str, Any], max_chars: int) -> bool:
    """Cut each message (see :func:`cap_trace`) and drop the oldest turns after the system
    prompt while the conversation is over four times ``max_chars``; each message is measured
    once, so a request of many messages costs time linear in its size."""
    messages = fields.get("messages")
    if not messages:
        return False
    capped = [_cap_message(m, max_chars) for m in messages]
    cut = any(c is not m for c, m in zip(capped, messages, strict=True))
    sizes = [_json_len(m) for m in capped]
    over = sum(sizes) + len(sizes) - 4 * max_chars
    if over > 0:
        drop: set[int] = set()
        for i, message in enumerate(capped[:-1]):  # the last turn always stays
            if over <= 0:
                break
            if message.get("role") != "system":
                drop.add(i)
                over -= sizes[i] + 1
        if over > 0:  # still over (long system prompts): only the last turn stays
            drop.update(i for i in range(len(capped) - 1))
        capped = [m for i, m in enumerate(capped) if i not in drop]
        cut = True
    if cut:
        fields["messages"] = capped
    return cut


def _cap_message(message: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """``message`` itself when it fits, else a copy with its OpenAI keys, texts cut."""
    if (
        len(message) <= len(_MESSAGE_KEYS)
        and _json_len(message) <= max_chars
        and all(k in _MESSAGE_KEYS for k in message)
    ):
        return message
    out = {k: message[k] for k in _MESSAGE_KEYS if k in message}
    content = out.get("content")
    if isinstance(content, str):
        out["content"] = content[:max_chars]
    elif isinstance(content, list):
        out["content"] = [_cap_part(p, max_chars) for p in content[:64]]
    elif content is not None:
        out["content"] = str(content)[:max_chars]
    for key in ("name", "tool_call_id"):
        if isinstance(out.get(key), str):
            out[key] = out[key][:ID_CHARS]
    if "tool_calls" in out and _json_len(out["tool_calls"]) > max_chars:
        out["tool_calls"] = []
    return out


def _cap_part(part: Any, max_chars: int) -> dict[str, Any]:
    if isinstance(part, dict) and part.get("type") == "text":
        return {"type": "text", "text": str(part.get("text") or "")[:max_chars]}
    kind = part.get("type") if isinstance(part, dict) else None
    return {"type": str(kind)[:64] if kind else "unknown"}  # images, audio: their kind only


def _json_len(value: Any) -> int:
    """Characters of ``value`` as JSON (orjson: UTF-8 bytes; a few times cheaper per trace)."""
    return len(orjson.dumps(value, default=str))
