"""Reading an upstream's SSE stream: however the bytes are split into reads, the pieces add up
to the same answer; events that arrived together come out as one piece; ``[DONE]`` ends it;
lines that are not JSON are skipped. Tool-call deltas assemble into whole calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from infra.gateway.sse import assemble_tool_calls, tool_call_deltas
from infra.upstream.completion import read_events


def events(*chunks: dict) -> bytes:
    return (
        b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    )


STREAM = (
    events(
        {"choices": [{"index": 0, "delta": {"content": "23 + 58"}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": " = 81"},
                    "logprobs": {"content": [{"token": " =", "logprob": -0.5}]},
                }
            ]
        },
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        },
    )
    + b"data: not json\n\n"
)


def pieces(split: list[int]) -> list:
    async def reads() -> AsyncIterator[bytes]:
        cuts = [0, *split, len(STREAM)]
        for a, b in zip(cuts, cuts[1:], strict=False):
            yield STREAM[a:b]

    async def collect() -> list:
        return [p async for p in read_events(reads())]

    return asyncio.run(collect())


def test_any_split_of_the_bytes_gives_the_same_answer() -> None:
    for split in ([], [1], [10, 11, 12], list(range(1, len(STREAM), 7)), [len(STREAM) // 2]):
        got = pieces(split)
        assert "".join(p.text for p in got) == "23 + 58 = 81", split
        assert [p.finish_reason for p in got if p.finish_reason] == ["stop"]
        assert [lp for p in got for lp in p.logprobs or []] == [-0.5]
        assert [p.tokens_out for p in got if p.tokens_out] == [3]


def test_events_read_together_are_one_piece() -> None:
    [one] = pieces([])
    assert one.text == "23 + 58 = 81" and one.tokens_in == 7


def test_byte_by_byte_reads_give_one_piece_per_event() -> None:
    got = pieces(list(range(1, len(STREAM))))
    assert [p.text for p in got] == ["23 + 58", " = 81", ""]


def test_tool_call_deltas_assemble_into_whole_calls() -> None:
    deltas = [
        {"index": 0, "id": "a", "type": "function", "function": {"name": "calc", "arguments": ""}},
        {"index": 0, "function": {"arguments": '{"x": '}},
        {
            "index": 1,
            "id": "b",
            "type": "function",
            "function": {"name": "find", "arguments": "{}"},
        },
        {"index": 0, "function": {"arguments": "1}"}},
    ]
    calls: list[dict] = []
    for d in deltas:
        assemble_tool_calls(calls, [d])
    assert calls == [
        {"id": "a", "type": "function", "function": {"name": "calc", "arguments": '{"x": 1}'}},
        {"id": "b", "type": "function", "function": {"name": "find", "arguments": "{}"}},
    ]


def test_whole_calls_become_numbered_deltas() -> None:
    whole = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    [delta] = tool_call_deltas(whole, first_index=2)
    assert delta["index"] == 2 and delta["id"] == "c"
    assert assemble_tool_calls([], [delta]) == whole


def sent_by_event_stream(events: list[bytes]) -> tuple[list[dict], bool]:
    """What :class:`EventStream` sends for a body yielding ``events``, and whether the body
    ran to its end (the relay records a trace as answered only then)."""
    from infra.gateway.sse import EventStream

    finished = False

    async def body() -> AsyncIterator[bytes]:
        nonlocal finished
        for event in events:
            yield event
        finished = True

    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.sleep(3600)  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(EventStream(body(), headers=[])({}, receive, send))  # type: ignore[arg-type]
    return sent, finished


def test_the_event_with_done_ends_the_response_in_the_same_write() -> None:
    sent, finished = sent_by_event_stream([b"data: {}\n\n", b"data: {}\n\ndata: [DONE]\n\n"])
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert [(m["body"][-8:], m["more_body"]) for m in bodies] == [
        (b"data: {}\n\n"[-8:], True),
        (b"[DONE]\n\n", False),
    ]
    assert finished  # the body was run to its end, not closed early


def test_a_stream_without_done_still_ends_the_response() -> None:
    sent, finished = sent_by_event_stream([b'data: {"error": {}}\n\n'])
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert [m["more_body"] for m in bodies] == [True, False] and bodies[-1]["body"] == b""
    assert finished


def test_request_path_ids_are_fresh_hex_of_the_asked_length() -> None:
    from infra.gateway.ids import random_hex

    ids = [random_hex() for _ in range(1000)] + [random_hex(10) for _ in range(1000)]
    assert all(len(i) == 32 for i in ids[:1000]) and all(len(i) == 20 for i in ids[1000:])
    assert len(set(ids)) == len(ids)  # across pool refills (4 KiB = 256 ids of 16 bytes)
    assert all(int(i, 16) >= 0 for i in ids)


def test_a_client_that_has_gone_stops_the_relay() -> None:
    from infra.gateway.sse import EventStream

    finished = False
    made = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal finished, made
        for _ in range(20):
            await asyncio.sleep(0.01)  # tokens still coming from the model
            made += 1
            yield b"data: {}\n\n"
        finished = True

    async def receive() -> dict:
        return {"type": "http.disconnect"}  # the client closed the connection

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(EventStream(body(), headers=[])({}, receive, send))  # type: ignore[arg-type]
    assert not finished and made < 5  # the model's stream was closed, not read to the end


def test_on_uvicorn_the_connection_says_the_client_has_gone() -> None:
    """uvicorn's ``send`` is a method of the request cycle, whose ``disconnected`` turns true
    when the socket closes: the relay stops on it without a watcher on ``receive()``."""
    from infra.gateway.sse import EventStream

    finished = False
    made = 0

    class Cycle:
        disconnected = False
        sent: list[dict] = []

        async def send(self, message: dict) -> None:
            self.sent.append(message)

    cycle = Cycle()

    async def body() -> AsyncIterator[bytes]:
        nonlocal finished, made
        for _ in range(20):
            await asyncio.sleep(0.001)
            made += 1
            if made == 3:
                cycle.disconnected = True  # the client closed the connection
            yield b"data: {}\n\n"
        finished = True

    async def receive() -> dict:
        raise AssertionError("receive() is not watched when the connection tells")

    asyncio.run(EventStream(body(), headers=[])({}, receive, cycle.send))  # type: ignore[arg-type]
    assert not finished and made == 3
    assert len([m for m in cycle.sent if m["type"] == "http.response.body"]) == 2
