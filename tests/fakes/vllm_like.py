"""An OpenAI-compatible upstream that answers the way vLLM's server does and records what it
receives: it requires its API key (``--api-key``), generates until ``max_tokens`` or its own
end (``natural_words``, never a budget it was not given), streams role, content and tool-call
deltas, and sends the usage chunk only when ``stream_options.include_usage`` asks for it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.upstream import Receive, Send, _read_body, _send_body, _send_json


@dataclass
class RecordingVllm:
    """The ASGI app; ``bodies`` and ``auth`` hold every chat request's body and
    ``Authorization`` header, in order."""

    version: str
    api_key: str | None = None
    natural_words: int = 40  # the answer's length when no max_tokens stops it earlier
    tool_calls: list[dict[str, Any]] | None = None  # answer with these when tools are offered
    bodies: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        headers = dict(scope["headers"])
        given = headers.get(b"authorization", b"").decode() or None
        if self.api_key and given != f"Bearer {self.api_key}":
            await _send_json(send, 401, {"error": "Unauthorized"})
            return
        if scope["method"] == "GET" and scope["path"].endswith("/models"):
            await _send_json(send, 200, {"object": "list", "data": [{"id": self.version}]})
            return
        body = await _read_body(receive)
        self.bodies.append(body)
        self.auth.append(given)
        words = [f"w{i}" for i in range(min(body.get("max_tokens") or 10**9, self.natural_words))]
        calls = self.tool_calls if body.get("tools") else None
        usage = {
            "prompt_tokens": 7 * len(body.get("messages") or []),
            "completion_tokens": len(words),
            "total_tokens": 7 * len(body.get("messages") or []) + len(words),
        }
        if body.get("stream"):
            await self._stream(send, body, words, calls, usage)
            return
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None if calls else " ".join(words),
        }
        if calls:
            message["tool_calls"] = calls
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": "tool_calls" if calls else "length" if len(words) < 40 else "stop",
        }
        await _send_json(
            send,
            200,
            {
                "id": "chatcmpl-x",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [choice],
                "usage": usage,
            },
        )

    async def _stream(
        self,
        send: Send,
        body: dict[str, Any],
        words: list[str],
        calls: list[dict[str, Any]] | None,
        usage: dict[str, int],
    ) -> None:
        start = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
        await send(start)
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if calls:
            for index, call in enumerate(calls):
                fn = call["function"]
                head = {"index": index, "id": call["id"], "type": "function"}
                deltas.append({"tool_calls": [{**head, "function": {"name": fn["name"]}}]})
                half = len(fn["arguments"]) // 2
                for part in (fn["arguments"][:half], fn["arguments"][half:]):
                    deltas.append(
                        {"tool_calls": [{"index": index, "function": {"arguments": part}}]}
                    )
        else:
            deltas += [{"content": w if i == 0 else " " + w} for i, w in enumerate(words)]
        for delta in deltas:
            await self._event(
                send, {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            )
        finish = "tool_calls" if calls else "stop"
        await self._event(send, {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        options = body.get("stream_options") or {}
        if options.get("include_usage"):  # vLLM sends usage only when asked
            await self._event(send, {"choices": [], "usage": usage})
        await _send_body(send, b"data: [DONE]\n\n", more=False)

    @staticmethod
    async def _event(send: Send, data: dict[str, Any]) -> None:
        chunk = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0, **data}
        await _send_body(send, f"data: {json.dumps(chunk)}\n\n".encode(), more=True)
