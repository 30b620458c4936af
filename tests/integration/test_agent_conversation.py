"""Agent traffic as it really is (issue 15 acceptance): a conversation with a system prompt, two
user turns, a tool call whose result holds an e-mail address, and a JSON answer goes gateway ->
collect -> score -> curate -> pairs with every message kept, the e-mail gone, and the pair's
prompt rendered from the whole conversation; the same conversation read from Langfuse (fake
server, real JSON shapes: nested AGENT / GENERATION / TOOL observations, or an OpenTelemetry
GenAI span) gives the same record; curating the next hour with the same conversation and
answer adds no row."""

from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from infra.catalog import open_catalog, scan
from infra.gateway import start_background_gateway
from infra.gateway.parts import Intervals
from infra.keys import window_id
from infra.settings import GatewaySettings, Settings, get_settings
from infra.store import open_store
from infra.traces import SpoolSource, TraceRecord
from infra.traces.conversation import WORKLOAD_HEADER
from infra.traces.langfuse_reader import LangfuseSource
from tasks.demo import domain
from tests.fakes.langfuse import FakeLangfuseServer
from tests.fakes.upstream import start_fake_upstream

pytestmark = [pytest.mark.integration, pytest.mark.waits]  # mostly waits on the clock

A, B = next(p for p in domain.training_pairs())
EMAIL = "jane.roe@example.com"
SYSTEM = "You are a calculator agent. Always use the calculator tool."
TOOL_RESULT = f"calculator: {A} + {B} = {A + B} (receipt sent to {EMAIL})"
RIGHT, WRONG = json.dumps({"result": A + B}), json.dumps({"result": A + B + 2})
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Hi! Can you add numbers for me?"},
    {"role": "assistant", "content": "Yes, which numbers?"},
    {"role": "user", "content": f"What is {A} + {B}?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "calculator", "arguments": json.dumps({"a": A, "b": B})},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": TOOL_RESULT},
]
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] or '' }}"
    "{% for c in m.get('tool_calls') or [] %}[call {{ c['function']['name'] }}"
    "({{ c['function']['arguments'] }})]{% endfor %}\n{% endfor %}<|assistant|>"
)


def _spooled(settings: Settings, start: datetime, n: int) -> list[TraceRecord]:
    source = SpoolSource(open_store(settings), max_record_bytes=settings.max_record_bytes)
    deadline = time.monotonic() + 20
    while True:
        records = source.read_window(start, start + timedelta(hours=1)).records
        if len(records) >= n or time.monotonic() > deadline:
            return records
        time.sleep(0.1)


def _send_through_gateway(settings: Settings, *, workload: str) -> None:
    answers = itertools.cycle([RIGHT, WRONG])
    upstream = start_fake_upstream("v0", answer=lambda _messages: next(answers))
    gw_settings = settings.model_copy(
        update={
            "gateway": GatewaySettings(
                upstreams={"v0": upstream.url},
                diverse_fraction=1.0,
                diverse_temperatures=[0.7, 1.1],
            )
        }
    )
    try:
        with start_background_gateway(
            gw_settings,
            port=0,
            store=open_store(settings),
            intervals=Intervals(flush_s=0.1),
            seed=0,
        ) as gw:
            resp = httpx.post(
                f"{gw.url}/v1/chat/completions",
                json={"model": "flywheel", "messages": MESSAGES, "user": "user-jane"},
                headers={"X-Session-Id": "session-1", WORKLOAD_HEADER: workload},
                timeout=30,
            )
            assert resp.status_code == 200, resp.text
    finally:
        upstream.stop()


def _tokenizer_with_template(path: Path) -> Path:
    from tasks.demo.pretrain import build_tokenizer

    tok = build_tokenizer(512)
    tok.chat_template = TEMPLATE
    tok.save_pretrained(path)
    return path


def test_a_conversation_goes_gateway_to_pairs_and_langfuse_gives_the_same_record(
    prefect_api: None, flywheel_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from flows.collect import collect
    from flows.curate import curate
    from flows.score import score
    from tasks.train.buffer import BufferScope
    from tasks.train.pairs import GoldenFilter, prompt_renderer, select_training_data

    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")
    monkeypatch.setenv("FLYWHEEL_WORKLOADS", '["calc-agent"]')
    get_settings.cache_clear()
    settings = get_settings()
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    _send_through_gateway(settings, workload="calc-agent")
    recorded = _spooled(settings, start, 2)
    assert len(recorded) >= 2  # the user's answer and its siblings
    for record in recorded:  # every message kept, as sent
        assert record.messages == MESSAGES
        assert (record.workload, record.session_id) == ("calc-agent", "session-1")
        assert record.question == f"What is {A} + {B}?"
        assert record.contexts == [SYSTEM, TOOL_RESULT]
        assert record.finish_reason == "stop"
    assert {r.answer for r in recorded} == {RIGHT, WRONG}

    assert collect(window_start=start, hours=1).written == len(recorded)
    score(window_start=start, hours=1)
    curated = curate(window_start=start)
    assert curated.written == len(recorded)
    rows = scan(open_catalog(settings), "training_examples").to_pylist()
    for row in rows:
        messages = json.loads(row["messages"])
        assert [m["role"] for m in messages] == [m["role"] for m in MESSAGES]
        assert row["workload"] == "calc-agent"
        tool = messages[-1]["content"]
        assert EMAIL not in row["messages"] and EMAIL not in " ".join(row["contexts"])
        assert "<EMAIL_ADDRESS>" in tool and f"{A} + {B} = {A + B}" in tool
        assert messages[0]["content"] == SYSTEM
        assert messages[4]["tool_calls"][0]["function"]["name"] == "calculator"
    assert {r["answer"] for r in rows} == {RIGHT, WRONG}

    render = prompt_renderer(_tokenizer_with_template(tmp_path / "tok"))
    selection = select_training_data(
        open_catalog(settings),
        min_margin=0.2,
        render=render,
        scope=BufferScope(buffer_days=7),
        contaminated=GoldenFilter.from_settings(settings.reward),
    )
    assert len(selection.pairs) == 1
    pair = selection.pairs[0]
    assert SYSTEM in pair["prompt"] and f"{A} + {B} = {A + B}" in pair["prompt"]
    assert "<|tool|>" in pair["prompt"] and "Yes, which numbers?" in pair["prompt"]
    assert EMAIL not in pair["prompt"]
    assert pair["chosen"].strip() == RIGHT and pair["rejected"].strip() == WRONG
    assert RIGHT not in pair["prompt"]  # only the final assistant turn is trained on

    # the same conversation from Langfuse: nested observations, and as an OTel GenAI span
    gateway_record = next(r for r in recorded if r.answer == RIGHT)
    at = gateway_record.created_at
    meta = {"workload": "calc-agent"}
    with FakeLangfuseServer() as lf:
        kw: dict[str, Any] = {"user_id": "user-jane", "session_id": "session-1"}
        lf.add_agent_trace("lf-1", at=at, messages=MESSAGES, answer={"result": A + B}, **kw)
        lf.add_agent_trace("lf-2", at=at, messages=MESSAGES, answer=RIGHT, otel=True, **kw)
        lf.add_agent_trace("lf-3", at=at, messages=MESSAGES, answer=RIGHT, metadata=meta, **kw)
        agent_only = lf.add_agent_trace("lf-4", at=at, messages=[], answer="x")
        agent_only.observations = agent_only.observations[:1]  # an AGENT span, no generation
        with LangfuseSource(
            host=lf.url, public_key=lf.public_key, secret_key=lf.secret_key, backoff_s=0.01
        ) as source:
            batch = source.read_window(start, start + timedelta(hours=1))
    assert batch.invalid == [] and batch.dropped == {"no_generation": 1}
    by_id = {r.trace_id: r for r in batch.records}
    fields = ("messages", "question", "contexts", "answer", "session_id", "user_id")
    for tid in ("lf-1", "lf-3"):
        got = by_id[tid]
        assert {f: getattr(got, f) for f in fields} == {
            f: getattr(gateway_record, f) for f in fields
        }
        assert got.model_version == "v0" and got.tool_calls[0]["name"] == "calculator"
    assert by_id["lf-3"].workload == "calc-agent" and by_id["lf-1"].workload == "default"
    otel = by_id["lf-2"]
    assert [(m["role"], m.get("content")) for m in otel.messages] == [
        (m["role"], m.get("content")) for m in MESSAGES
    ]
    assert otel.messages[4]["tool_calls"][0]["function"]["name"] == "calculator"
    assert (otel.question, otel.contexts, otel.answer) == (
        gateway_record.question,
        gateway_record.contexts,
        RIGHT,
    )
    assert (otel.tokens_in, otel.tokens_out) == (40, 6)


def _renumbered(call_id: str) -> list[dict[str, Any]]:
    """The conversation with its tool call numbered ``call_id`` (clients number calls per
    request: the same conversation an hour later differs in its ids only)."""
    call = {**MESSAGES[-2]["tool_calls"][0], "id": call_id}
    return [
        *MESSAGES[:-2],
        {**MESSAGES[-2], "tool_calls": [call]},
        {**MESSAGES[-1], "tool_call_id": call_id},
    ]


def test_the_same_conversation_and_answer_an_hour_later_adds_no_row(
    prefect_api: None, flywheel_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.collect import collect
    from flows.curate import curate
    from flows.score import score
    from infra.traces import SpoolWriter

    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")
    get_settings.cache_clear()
    settings = get_settings()
    t0 = datetime(2026, 11, 22, 10, tzinfo=UTC)
    writer = SpoolWriter(open_store(settings), writer_id="test")
    for hour in (0, 1):
        for i, answer in enumerate((str(A + B), str(A + B + 2))):
            writer.write_trace(
                TraceRecord.model_validate(
                    {
                        "trace_id": f"h{hour}-{i}",
                        "prompt_group": f"g{hour}",
                        "user_id": "user-jane",
                        "messages": _renumbered(f"call_{hour}"),
                        "answer": answer,
                        "model_version": "v0",
                        "latency_s": 0.1,
                        "created_at": t0 + timedelta(hours=hour, minutes=5),
                    }
                )
            )
    writer.flush()
    written = []
    for hour in (0, 1, 0, 1):  # each window twice: reruns replace, never add
        start = t0 + timedelta(hours=hour)
        collect(window_start=start, hours=1)
        score(window_start=start, hours=1)
        written.append(curate(window_start=start))
    assert [r.written for r in written] == [2, 0, 2, 0]
    assert written[1].dropped["duplicate_earlier_window"] == 2
    rows = scan(open_catalog(settings), "training_examples").to_pylist()
    assert sorted(r["trace_id"] for r in rows) == ["h0-0", "h0-1"]
    assert {r["window"] for r in rows} == {window_id(t0)}
