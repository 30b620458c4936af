"""The streamed answer's last events: whatever arrives after the upstream's finish (the usage
event the gateway always asks for) is held, so the client gets the final text, the finish
reason, the usage and ``[DONE]`` in one write."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from infra.gateway.calls import Call
from infra.gateway.chat_request import ChatRequest
from infra.gateway.streaming import _relay
from infra.upstream.completion import Completion, GenParams


class Recorder:
    """What the relay calls on the recorder, ignored."""

    def observe(self, *_: Any, **__: Any) -> None:
        pass

    def trace(self, *_: Any, **__: Any) -> None:
        pass


async def upstream(pieces: list[Completion]) -> AsyncIterator[Completion]:
    for piece in pieces:
        yield piece


def relayed(pieces: list[Completion], *, include_usage: bool) -> list[bytes]:
    req = ChatRequest(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        params=GenParams(),
        include_usage=include_usage,
    )

    async def run() -> list[bytes]:
        body = _relay(
            Call(
                req=req,
                version="v0",
                route="stable",
                params=req.params,
                started=0.0,
                prompt_group="g",
            ),
            first=pieces[0],
            pieces=upstream(pieces[1:]),
            recorder=Recorder(),  # type: ignore[arg-type]
            trace_id="t",
        )
        return [event async for event in body]

    return asyncio.run(run())


def test_a_usage_event_after_the_finish_does_not_split_the_last_write() -> None:
    pieces = [
        Completion(text="4", finish_reason=None),
        Completion(text="2", finish_reason="stop"),
        Completion(text="", finish_reason=None, tokens_in=5, tokens_out=2),  # usage only
    ]
    writes = relayed(pieces, include_usage=True)
    assert len(writes) == 2
    last = writes[-1]
    assert b'"content":"2"' in last
    assert b'"finish_reason":"stop"' in last
    assert b'"prompt_tokens":5' in last
    assert last.endswith(b"data: [DONE]\n\n")
