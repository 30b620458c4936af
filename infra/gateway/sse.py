"""Streaming to the client: the SSE response, and tool calls as stream deltas.

Tool calls stream as OpenAI deltas (``index``, then ``id``/``type``/``function.name`` once and
``function.arguments`` in fragments): they are passed on as deltas and assembled into whole calls
for the trace.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from starlette.responses import Response

from infra.upstream.completion import ToolCallDelta

DONE_LINE = b"data: [DONE]\n\n"  # the last event of an OpenAI stream


def tool_call_deltas(calls: list[ToolCallDelta], *, first_index: int) -> list[ToolCallDelta]:
    """Tool calls as stream deltas: an upstream's deltas (several events read at once merged
    into one delta per call, so a client that reads one delta per index misses nothing), whole
    calls (an in-process model) numbered from ``first_index``."""
    out: list[ToolCallDelta] = []
    for n, call in enumerate(calls):
        if "index" not in call:
            out.append({"index": first_index + n, **call})
        elif out and out[-1].get("index") == call["index"]:
            _merge_delta(out[-1], call)
        else:
            out.append({**call, "function": {**(call.get("function") or {})}})
    return out


def _merge_delta(into: ToolCallDelta, delta: ToolCallDelta) -> None:
    for key in ("id", "type"):
        if into.get(key) is None and delta.get(key) is not None:
            into[key] = delta[key]
    fn, more = into["function"], delta.get("function") or {}
    if not fn.get("name") and more.get("name"):
        fn["name"] = more["name"]
    if arguments := more.get("arguments"):
        fn["arguments"] = (fn.get("arguments") or "") + arguments


def assemble_tool_calls(
    calls: list[ToolCallDelta], deltas: list[ToolCallDelta]
) -> list[ToolCallDelta]:
    """Whole tool calls from stream deltas, appended to ``calls`` by their ``index``."""
    for delta in deltas:
        index = delta.get("index", len(calls))
        fn = delta.get("function") or {}
        if not isinstance(index, int) or index >= len(calls):
            calls.append(
                {
                    "id": delta.get("id"),
                    "type": delta.get("type", "function"),
                    "function": {
                        "name": fn.get("name") or "",
                        "arguments": fn.get("arguments") or "",
                    },
                }
            )
            continue
        call = calls[index]
        call["id"] = call.get("id") or delta.get("id")
        function = call.setdefault("function", {"name": "", "arguments": ""})
        function["name"] = function.get("name") or fn.get("name") or ""
        function["arguments"] = (function.get("arguments") or "") + (fn.get("arguments") or "")
    return calls


class EventStream(Response):
    """An SSE response sent straight to the server.

    Starlette's ``StreamingResponse`` runs every stream inside an anyio task group with a second
    task listening for the disconnect (uvicorn speaks ASGI 2.3), which cost more CPU than the
    relay itself. Here the relay looks between events whether the client has gone: on uvicorn
    its connection says so (``disconnected``, set when the socket closes); on any other server
    one plain future waits on ``receive()`` (once a second event comes: an answer that arrives
    in one event needs none). When the client has gone the relay stops, and closing the
    generator records the trace as failed, as before. The event ending in ``[DONE]`` is sent as
    the response's last body.

    A client that stops reading (its socket buffers full, the server's send waiting) for
    ``stall_s`` has its connection dropped: the relay ends as for a client that went away, and
    the upstream connection it held goes back to the pool."""

    media_type = "text/event-stream"

    def __init__(
        self,
        body: AsyncGenerator[bytes, None],
        *,
        headers: list[tuple[bytes, bytes]],
        stall_s: float | None = None,
    ) -> None:
        self.body_iterator = body
        self.stall_s = stall_s
        self.status_code = 200
        self.background = None
        self.raw_headers = [*headers, (b"content-type", b"text/event-stream; charset=utf-8")]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:  # noqa: ARG002 - ASGI
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        connection = _connection(send)
        gone: asyncio.Future[None] | None = None  # watched once a second event comes
        ended = sent = False
        watchdog = None
        if connection is not None and self.stall_s:
            watchdog = _Watchdog(connection, self.stall_s)
            send = watchdog.wrap(send)
        try:
            async for event in self.body_iterator:
                if connection is not None:
                    if connection.disconnected:
                        break
                elif gone is not None:
                    if gone.done():
                        break
                elif sent:
                    gone = asyncio.ensure_future(_disconnected(receive))
                sent = True
                # the event that ends the stream also ends the response: one write, not two
                ended = event.endswith(DONE_LINE)
                await send({"type": "http.response.body", "body": event, "more_body": not ended})
            else:
                if not ended:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if gone is not None:
                gone.cancel()
            if watchdog is not None:
                watchdog.stop()
            await self.body_iterator.aclose()


class _Watchdog:
    """Drops a uvicorn connection whose ``send`` made no progress for ``stall_s`` (one timer
    per stream, not one per event)."""

    def __init__(self, connection: Any, stall_s: float) -> None:
        self.connection = connection
        self.stall_s = stall_s
        self.sending = False
        self.progress = self.seen = 0
        self.timer = asyncio.get_running_loop().call_later(stall_s, self._check)

    def wrap(self, send: Any) -> Any:
        async def watched(message: Any) -> None:
            self.sending = True
            try:
                await send(message)
            finally:
                self.sending = False
                self.progress += 1

        return watched

    def _check(self) -> None:
        if self.sending and self.progress == self.seen:
            transport = getattr(self.connection, "transport", None)
            if transport is not None:
                transport.abort()  # uvicorn marks the cycle disconnected; send returns
            return
        self.seen = self.progress
        self.timer = asyncio.get_running_loop().call_later(self.stall_s, self._check)

    def stop(self) -> None:
        self.timer.cancel()


def _connection(send: Any) -> Any:
    """uvicorn's request cycle behind ``send`` (it knows whether the client has gone), or None
    on any other server."""
    owner = getattr(send, "__self__", None)
    return owner if isinstance(getattr(owner, "disconnected", None), bool) else None


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
