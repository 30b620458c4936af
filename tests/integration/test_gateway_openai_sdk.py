"""An agent built on the official openai SDK, with tools, json and streamed, calling through the
gateway to an upstream that answers like vLLM and records what it receives: the upstream gets
the agent's own budget (none when it names none), its key, the tools and ``stream_options``;
the agent gets whole answers and real token counts; the traces record them; the key is never
in a trace, a log line or an error body."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pydantic import SecretStr

from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.parts import Intervals
from infra.gateway.serve import serve_in_thread
from infra.settings import GatewaySettings, Settings, UpstreamSettings
from infra.store import LocalStore
from tests.fakes.vllm_like import RecordingVllm
from tests.procs import free_port

pytestmark = pytest.mark.integration

KEY = "sk-upstream-0123456789abcdef-secret"
TOKEN = "sdk-admin-token-0123456789abcdef0123456789"
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "calculator", "arguments": json.dumps({"expression": "53 * 47"})},
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
        },
    }
]
MESSAGES: list[Any] = [
    {"role": "system", "content": "You are a calculator agent."},
    {"role": "user", "content": "What is 53 * 47?"},
]


@pytest.fixture
def vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RecordingVllm, str]]:
    monkeypatch.setenv("FLYWHEEL_TEST_UPSTREAM_KEY", KEY)
    app = RecordingVllm("v0", api_key=KEY, tool_calls=[CALL])
    url, server, thread = serve_in_thread(app)
    yield app, url
    server.should_exit = True
    thread.join(10)


def start(tmp_path: Path, url: str, **upstreams: Any) -> GatewayHandle:
    entry = UpstreamSettings(url=f"{url}/v1", api_key_env="FLYWHEEL_TEST_UPSTREAM_KEY")
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(
            upstreams={"v0": entry, **upstreams},
            admin_token=SecretStr(TOKEN),
            diverse_fraction=0.0,
            max_tokens_limit=64,
        ),
    )
    return start_background_gateway(
        settings,
        port=0,
        store=LocalStore(tmp_path / "store"),
        intervals=Intervals(state_s=0.1, flush_s=0.1),
    )


def traces(tmp_path: Path) -> dict[str, dict[str, Any]]:
    lines = [
        json.loads(line)
        for path in sorted((tmp_path / "store" / "traces").rglob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    return {t["trace_id"]: t for t in lines if t.get("type") == "trace"}


def test_an_openai_sdk_agent_with_tools_json_and_streamed(
    tmp_path: Path, vllm: tuple[RecordingVllm, str], caplog: pytest.LogCaptureFixture
) -> None:
    app, url = vllm
    caplog.set_level(logging.DEBUG)
    with start(tmp_path, url) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="agent-key", max_retries=0)
        # json, tools, no max_tokens
        raw = client.chat.completions.with_raw_response.create(
            model="flywheel", messages=MESSAGES, tools=TOOLS, tool_choice="auto", seed=3
        )
        called = raw.parse()
        assert called.choices[0].message.tool_calls is not None
        assert (
            called.choices[0].message.tool_calls[0].function.arguments
            == CALL["function"]["arguments"]
        )
        # json, plain text, no max_tokens: the whole answer, not 16 tokens of it
        answer = client.chat.completions.create(model="flywheel", messages=MESSAGES)
        assert answer.choices[0].message.content == " ".join(f"w{i}" for i in range(40))
        assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (14, 40)
        # streamed with usage asked for
        chunks = list(
            client.chat.completions.create(
                model="flywheel",
                messages=MESSAGES,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == answer.choices[0].message.content
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 40
        streamed_id = chunks[0].id.removeprefix("chatcmpl-")
        # streamed tool calls, no usage asked for: none sent, the trace still counts tokens
        tool_chunks = list(
            client.chat.completions.create(
                model="flywheel", messages=MESSAGES, tools=TOOLS, stream=True
            )
        )
        assert all(c.usage is None for c in tool_chunks)
        args = "".join(
            c.choices[0].delta.tool_calls[0].function.arguments or ""
            for c in tool_chunks
            if c.choices and c.choices[0].delta.tool_calls
        )
        assert args == CALL["function"]["arguments"]
        # the agent's own budget passes, clamped to the gateway's maximum
        client.chat.completions.create(model="flywheel", messages=MESSAGES, max_tokens=5)
        client.chat.completions.create(model="flywheel", messages=MESSAGES, max_tokens=10**7)
    sent = app.bodies
    assert ["max_tokens" in b for b in sent[:4]] == [False] * 4
    assert [b.get("max_tokens") for b in sent[4:]] == [5, 64]
    assert sent[0]["tools"] == TOOLS and sent[0]["tool_choice"] == "auto" and sent[0]["seed"] == 3
    assert sent[2]["stream_options"] == {"include_usage": True}
    assert sent[3]["stream_options"] == {"include_usage": True}  # asked for the trace's sake
    assert all(b["model"] == "v0" and "user" not in b for b in sent)
    assert app.auth == [f"Bearer {KEY}"] * 6  # the upstream's key, not the agent's
    recorded = traces(tmp_path)
    json_trace = recorded[raw.headers["x-trace-id"]]
    assert json_trace["tool_calls"][0]["function"]["name"] == "calculator"
    assert (recorded[streamed_id]["tokens_in"], recorded[streamed_id]["tokens_out"]) == (14, 40)
    assert all(t["tokens_out"] is not None for t in recorded.values())
    spool = "".join(p.read_text() for p in (tmp_path / "store").rglob("*.jsonl"))
    assert KEY not in spool and KEY not in caplog.text


def test_refused_fields_and_bad_numbers_are_400_and_reach_no_upstream(
    tmp_path: Path, vllm: tuple[RecordingVllm, str]
) -> None:
    app, url = vllm
    with start(tmp_path, url) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="agent-key", max_retries=0)
        for extra in (
            {"chat_template": "{{ messages }}"},
            {"chat_template_kwargs": {"enable_thinking": True}},
            {"prompt_logprobs": 5},
            {"max_tokens": 1e300},
            {"temperature": 1e308 * 10},
            {"logit_bias": {"42": 1e300}},
            {"messages": [{"role": "user", "content": "x"}] * 5000},
        ):
            body = {"model": "flywheel", "messages": MESSAGES, **extra}
            resp = httpx.post(f"{gw.url}/v1/chat/completions", content=_dumps(body))
            assert resp.status_code == 400, (extra.keys(), resp.text)
            assert resp.json()["error"]["type"] == "invalid_request_error"
        nested: Any = "x"
        for _ in range(500):
            nested = [nested]
        for path in ("/v1/chat/completions", "/v1/feedback"):
            resp = httpx.post(f"{gw.url}{path}", json={"messages": MESSAGES, "trace_id": nested})
            assert resp.status_code == 400, path
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(
                model="flywheel", messages=MESSAGES, extra_body={"chat_template": "x"}
            )
        # fields outside the allow-list are dropped, allowed ones forwarded
        client.chat.completions.create(
            model="flywheel",
            messages=MESSAGES,
            stop=["\n"],
            response_format={"type": "json_object"},
            extra_body={"top_k": 5, "guided_grammar": "x", "priority": 9},
        )
    assert len(app.bodies) == 1
    forwarded = app.bodies[0]
    assert forwarded["stop"] == ["\n"] and forwarded["top_k"] == 5
    assert forwarded["response_format"] == {"type": "json_object"}
    assert "guided_grammar" not in forwarded and "priority" not in forwarded


def test_an_unreachable_or_keyless_upstream_is_a_502_naming_no_host_or_key(
    tmp_path: Path, vllm: tuple[RecordingVllm, str], caplog: pytest.LogCaptureFixture
) -> None:
    _app, url = vllm
    key_file = tmp_path / "v2.key"
    key_file.write_text("wrong-key-from-a-file\n")
    down = f"http://127.0.0.1:{free_port()}/v1"
    with start(
        tmp_path,
        url,
        v1=down,
        v2=UpstreamSettings(url=f"{url}/v1", api_key_file=key_file),
    ) as gw:
        operator = openai.OpenAI(base_url=f"{gw.admin_url}/v1", api_key=TOKEN, max_retries=0)
        for version in ("v1", "v2"):
            with pytest.raises(openai.APIStatusError) as failed:
                operator.chat.completions.create(model=version, messages=MESSAGES)
            assert failed.value.status_code == 502
            body = failed.value.response.text
            assert "127.0.0.1" not in body and KEY not in body and "wrong-key" not in body
        health = httpx.get(f"{gw.url}/healthz").text
        assert "127.0.0.1" not in health
    assert "wrong-key" not in caplog.text and KEY not in caplog.text


def _dumps(body: dict[str, Any]) -> bytes:
    """JSON as a careless client writes it (Python's json allows ``Infinity``)."""
    return json.dumps(body).encode()
