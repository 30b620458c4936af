"""Token logprobs through the gateway: HTTP upstreams (a fake speaking vLLM's logprobs JSON,
which sends them only when asked) are always asked, so every trace records them for the KL
check; a client that asked gets them back, as the upstream sent them."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai

from tests.integration.test_gateway_api import MESSAGES, spool, start, upstreams  # noqa: F401


def test_the_trace_has_logprobs_though_the_client_did_not_ask(tmp_path: Path, upstreams) -> None:  # noqa: F811
    upstreams["v0"].app.keep_bodies = True
    with start(tmp_path, upstreams) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused")
        reply = client.chat.completions.create(model="flywheel", messages=MESSAGES)
        [trace] = spool(tmp_path)
    assert reply.choices[0].logprobs is None  # not asked: not sent
    [sent] = upstreams["v0"].app.bodies
    assert sent["logprobs"] is True
    words = reply.choices[0].message.content.split()
    assert trace["logprobs"] == [-0.1] * len(words)


def test_a_client_that_asks_gets_the_upstreams_logprobs(tmp_path: Path, upstreams) -> None:  # noqa: F811
    with start(tmp_path, upstreams) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused")
        reply = client.chat.completions.create(model="flywheel", messages=MESSAGES, logprobs=True)
        [trace] = spool(tmp_path)
    content = reply.choices[0].logprobs.content
    words = reply.choices[0].message.content.split()
    assert [t.token for t in content] == words
    assert [t.logprob for t in content] == trace["logprobs"] == [-0.1] * len(words)
    assert content[0].bytes == list(words[0].encode())


def test_streamed_chunks_carry_logprobs_when_asked(tmp_path: Path, upstreams) -> None:  # noqa: F811
    body = {"model": "flywheel", "messages": MESSAGES, "stream": True, "logprobs": True}
    with start(tmp_path, upstreams) as gw:
        with httpx.stream("POST", f"{gw.url}/v1/chat/completions", json=body) as resp:
            lines = [x[5:].strip() for x in resp.iter_lines() if x.startswith("data:")]
        [trace] = spool(tmp_path)
    chunks = [json.loads(x) for x in lines if x != "[DONE]"]
    tokens = [
        t["token"]
        for c in chunks
        for ch in c["choices"]
        if ch.get("logprobs")
        for t in ch["logprobs"]["content"]
    ]
    text = "".join(ch["delta"].get("content") or "" for c in chunks for ch in c["choices"])
    assert "".join(tokens) == text and tokens
    assert trace["logprobs"] == [-0.1] * len(tokens)
