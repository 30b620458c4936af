"""An agent's tool calls through the gateway from an HTTP upstream (vLLM's OpenAI server):
streamed as deltas (index, id, name, then the arguments in fragments) they reach the client as
deltas the OpenAI SDK assembles, and the trace records the whole calls; a plain JSON answer
passes them on as they are."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai

from tests.integration.test_gateway_api import MESSAGES, spool, start, upstreams  # noqa: F401

CALLS = [
    {
        "id": "call_1",
        "type": "function",
        "function": {"name": "calculator", "arguments": json.dumps({"expression": "23 + 58"})},
    },
    {
        "id": "call_2",
        "type": "function",
        "function": {"name": "lookup", "arguments": json.dumps({"city": "서울", "n": 2})},
    },
]


def test_streamed_tool_calls_reach_the_client_and_the_trace_whole(
    tmp_path: Path,
    upstreams,  # noqa: F811
) -> None:
    upstreams["v0"].app.tool_calls = CALLS
    with start(tmp_path, upstreams) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused")
        stream = client.chat.completions.create(model="flywheel", messages=MESSAGES, stream=True)
        got: dict[int, dict] = {}
        finish = None
        for chunk in stream:
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                for d in choice.delta.tool_calls or []:
                    call = got.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                    call["id"] = call["id"] or d.id
                    call["name"] += (d.function and d.function.name) or ""
                    call["arguments"] += (d.function and d.function.arguments) or ""
        [trace] = spool(tmp_path)
    assert finish == "tool_calls"
    assert [
        {"id": c["id"], "name": c["name"], "arguments": json.loads(c["arguments"])}
        for _, c in sorted(got.items())
    ] == [
        {
            "id": c["id"],
            "name": c["function"]["name"],
            "arguments": json.loads(c["function"]["arguments"]),
        }
        for c in CALLS
    ]
    assert [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in trace["tool_calls"]
    ] == [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in CALLS]
    assert trace["finish_reason"] == "tool_calls" and trace["error_count"] == 0


def test_tool_calls_in_a_json_answer_pass_through(tmp_path: Path, upstreams) -> None:  # noqa: F811
    upstreams["v0"].app.tool_calls = CALLS
    with start(tmp_path, upstreams) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused")
        reply = client.chat.completions.create(model="flywheel", messages=MESSAGES)
        [trace] = spool(tmp_path)
    calls = reply.choices[0].message.tool_calls
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in CALLS
    ]
    assert reply.choices[0].finish_reason == "tool_calls"
    assert trace["tool_calls"] == CALLS


def test_a_client_that_leaves_mid_stream_ends_the_relay_and_the_trace_says_so(
    tmp_path: Path,
    upstreams,  # noqa: F811
) -> None:
    app = upstreams["v0"].app
    app.answer = lambda _messages: " ".join(["word"] * 200)
    app.chunk_delay_s = 0.05  # a 10 s stream
    body = {"model": "flywheel", "messages": MESSAGES, "stream": True}
    with start(tmp_path, upstreams) as gw:
        with httpx.stream("POST", f"{gw.url}/v1/chat/completions", json=body) as resp:
            first = next(resp.iter_lines())
        [trace] = spool(tmp_path)  # waits at most 10 s: written once the relay stopped
    assert first.startswith("data:")
    assert trace["error_count"] == 1 and trace["answer"] == ""
