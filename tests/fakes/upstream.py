"""A fast, fake OpenAI-compatible model server for tests, benchmarks and release drills.

Plain ASGI (no framework, so its own overhead stays small next to the gateway's): answers
``POST /v1/chat/completions`` (JSON or SSE stream) and ``GET /v1/models``, after ``delay_s``,
failing a ``fail_rate`` share of requests with HTTP ``fail_status`` (500). Run it in a thread with
:func:`start_fake_upstream`, or as a process: ``python -m tests.fakes.upstream --port 9001``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def echo_answer(messages: list[dict[str, Any]]) -> str:
    users = [m for m in messages if m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    return f"echo: {content}"


def refuse_bad_stop(body: dict[str, Any]) -> str | None:
    """vLLM's refusal of a ``stop`` list holding anything but strings (None: accepted)."""
    stop = body.get("stop")
    if isinstance(stop, list) and not all(isinstance(s, str) for s in stop):
        return "1 validation error: stop.list[str].0 Input should be a valid string"
    return None


def long_for_long(messages: list[dict[str, Any]]) -> str:
    """Eight MB of answer (128 words of 64 KB) to "long", an echo to anything else."""
    if messages and messages[-1].get("content") == "long":
        return " ".join(["a" * 65536] * 128)
    return echo_answer(messages)


@dataclass
class FakeUpstream:
    """The ASGI app; knobs may be changed while it serves (e.g. start failing mid-test)."""

    version: str = "fake"
    delay_s: float = 0.0
    fail_rate: float = 0.0
    fail_status: int = 500  # the status of an injected failure
    answer: Callable[[list[dict[str, Any]]], str] = echo_answer
    calls: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    keep_bodies: bool = False
    tool_calls: list[dict[str, Any]] | None = None  # answer with these calls instead of text
    chunk_delay_s: float = 0.0  # between the events of a stream
    # a request body -> the message of a 400 refusing it (as vLLM refuses a bad field), or None
    refuse: Callable[[dict[str, Any]], str | None] | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    # while set, each request waits until the event is set (``released`` counts those let go)
    hold: threading.Event | None = None
    released: int = 0

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        path, method = scope["path"], scope["method"]
        if method == "GET" and path.endswith("/models"):
            data = {"object": "list", "data": [{"id": self.version, "object": "model"}]}
            await _send_json(send, 200, data)
            return
        if method != "POST" or not path.endswith("/chat/completions"):
            await _send_json(send, 404, {"error": {"message": "not found"}})
            return
        body = await _read_body(receive)
        self.calls += 1
        if self.keep_bodies:
            self.bodies.append(body)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.hold is not None:
            await asyncio.to_thread(self.hold.wait)
            self.released += 1
        if self.refuse is not None and (why := self.refuse(body)) is not None:
            error = {"message": why, "type": "BadRequestError", "param": None, "code": 400}
            await _send_json(send, 400, {"error": error})
            return
        if self.fail_rate and self.rng.random() < self.fail_rate:
            await _send_json(send, self.fail_status, {"error": {"message": "injected failure"}})
            return
        text = self.answer(body.get("messages") or [])
        if self.tool_calls and body.get("stream"):
            await self._stream_tool_calls(send, self.tool_calls)
        elif body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            await self._stream(send, text, logprobs=bool(body.get("logprobs")), usage=usage)
        else:
            await _send_json(send, 200, self._completion(text, body))

    def _completion(self, text: str, body: dict[str, Any]) -> dict[str, Any]:
        words = text.split()
        logprobs = _vllm_logprobs(words) if body.get("logprobs") else None  # only when asked
        return {
            "id": f"cmpl-{self.calls}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.version),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text}
                    if not self.tool_calls
                    else {"role": "assistant", "content": None, "tool_calls": self.tool_calls},
                    "finish_reason": "tool_calls" if self.tool_calls else "stop",
                    "logprobs": logprobs,
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": len(words), "total_tokens": 5},
        }

    async def _stream(
        self, send: Send, text: str, *, logprobs: bool = False, usage: bool = False
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        words = text.split(" ")
        for i, word in enumerate(words):
            delta = {"content": word if i == 0 else " " + word}
            choice: dict[str, Any] = {"index": 0, "delta": delta}
            if logprobs:
                choice["logprobs"] = _vllm_logprobs([delta["content"]])
            chunk = {"object": "chat.completion.chunk", "choices": [choice]}
            if self.chunk_delay_s:
                await asyncio.sleep(self.chunk_delay_s)
            await _send_body(send, f"data: {json.dumps(chunk)}\n\n".encode(), more=True)
        last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        await _send_body(send, f"data: {json.dumps(last)}\n\n".encode(), more=True)
        if usage:  # as vLLM: an event of its own after the finish, no choices
            chunk = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": len(words)}}
            await _send_body(send, f"data: {json.dumps(chunk)}\n\n".encode(), more=True)
        await _send_body(send, b"data: [DONE]\n\n", more=False)

    async def _stream_tool_calls(self, send: Send, calls: list[dict[str, Any]]) -> None:
        """Tool calls as OpenAI/vLLM stream them: per call a delta with its index, id, type and
        name, then the arguments in fragments; each event its own write."""
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for index, call in enumerate(calls):
            fn = call["function"]
            head = {"index": index, "id": call["id"], "type": "function"}
            deltas = [{**head, "function": {"name": fn["name"], "arguments": ""}}]
            args = fn["arguments"]
            cut = [0, len(args) // 3, 2 * len(args) // 3, len(args)]
            for a, b in zip(cut, cut[1:], strict=False):
                deltas.append({"index": index, "function": {"arguments": args[a:b]}})
            for delta in deltas:
                chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]}
                await _send_body(send, f"data: {json.dumps(chunk)}\n\n".encode(), more=True)
        last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
        await _send_body(send, f"data: {json.dumps(last)}\n\n".encode(), more=True)
        await _send_body(send, b"data: [DONE]\n\n", more=False)


def _vllm_logprobs(tokens: list[str]) -> dict[str, Any]:
    """``logprobs`` as vLLM's OpenAI server sends it for ``"logprobs": true``."""
    return {
        "content": [
            {"token": t, "logprob": -0.1, "bytes": list(t.encode()), "top_logprobs": []}
            for t in tokens
        ]
    }


async def _read_body(receive: Receive) -> dict[str, Any]:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    try:
        data = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


async def _send_body(send: Send, body: bytes, *, more: bool) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": more})


async def _send_json(send: Send, status: int, data: Any) -> None:
    body = json.dumps(data).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await _send_body(send, body, more=False)


@dataclass
class EchoUpstream:
    """An in-process upstream (no HTTP at all) for tests that only exercise the gateway."""

    version: str
    delay_s: float = 0.0
    answer: Callable[[list[dict[str, Any]]], str] = echo_answer
    calls: int = 0

    async def complete(self, messages: list[dict[str, Any]], params: Any) -> Any:
        from infra.upstream.upstreams import Completion

        self.calls += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        text = self.answer(messages)
        return Completion(text=text, tokens_in=5, tokens_out=len(text.split()))

    async def stream(self, messages: list[dict[str, Any]], params: Any) -> Any:
        yield await self.complete(messages, params)


@dataclass
class FakeUpstreamHandle:
    """``url`` is the OpenAI base URL (ends in ``/v1``); ``app`` holds the knobs and counters."""

    url: str
    app: FakeUpstream
    server: Any
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def start_fake_upstream(version: str = "fake", **knobs: Any) -> FakeUpstreamHandle:
    """A :class:`FakeUpstream` serving on a free loopback port in a daemon thread."""
    from infra.gateway.serve import serve_in_thread

    app = FakeUpstream(version=version, **knobs)
    url, server, thread = serve_in_thread(app)
    return FakeUpstreamHandle(url=f"{url}/v1", app=app, server=server, thread=thread)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    parser.add_argument("--version", default="fake")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--fail-rate", type=float, default=0.0)
    parser.add_argument("--long-answers", action="store_true", help="8 MB to 'long'")
    args = parser.parse_args()
    import uvicorn

    app = FakeUpstream(version=args.version, delay_s=args.delay, fail_rate=args.fail_rate)
    if args.long_answers:
        app.answer = long_for_long
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
