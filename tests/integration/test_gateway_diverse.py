"""Diverse sampling respects the caller (issue 15 item 5): the caller's temperature answers the
user, a stream's siblings start once it has ended well, and siblings skipped under load are
counted."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.parts import Intervals
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from tests.fakes.upstream import FakeUpstreamHandle, start_fake_upstream

pytestmark = pytest.mark.integration

MESSAGES = [
    {"role": "system", "content": "calculator: 53 * 47 = 2491"},
    {"role": "user", "content": "What is 53 * 47?"},
]


@pytest.fixture
def upstream() -> Iterator[FakeUpstreamHandle]:
    handle = start_fake_upstream("v0", keep_bodies=True)
    yield handle
    handle.stop()


def start(tmp_path: Path, upstream: FakeUpstreamHandle, **gw: Any) -> GatewayHandle:
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(upstreams={"v0": upstream.url}, **{"diverse_fraction": 1.0, **gw}),
    )
    store = LocalStore(tmp_path / "store")
    return start_background_gateway(
        settings, port=0, store=store, intervals=Intervals(state_s=0.1, flush_s=0.1), seed=0
    )


def spool(tmp_path: Path, wait_for: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while True:
        traces = [
            json.loads(line)
            for path in sorted((tmp_path / "store" / "traces").rglob("*.jsonl"))
            for line in path.read_text().splitlines()
        ]
        if len(traces) >= wait_for or time.monotonic() > deadline:
            return [t for t in traces if t["type"] == "trace"]
        time.sleep(0.05)


def test_a_temperature_0_caller_gets_its_deterministic_answer_and_siblings_are_recorded(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    with start(tmp_path, upstream) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused")
        raw = client.chat.completions.with_raw_response.create(
            model="flywheel", messages=MESSAGES, temperature=0
        )
        reply = raw.parse()
        traces = spool(tmp_path, wait_for=3)
    assert reply.choices[0].message.content == "echo: What is 53 * 47?"
    # the user's call went upstream at temperature 0; the siblings spread from it
    temps = sorted(b["temperature"] for b in upstream.app.bodies)
    assert temps == pytest.approx([0.0, 0.2, 0.4])
    assert len(traces) == 3 and len({t["prompt_group"] for t in traces}) == 1
    served = [t for t in traces if t["trace_id"] == raw.headers["x-trace-id"]]
    assert served and served[0]["temperature"] == 0.0
    assert sorted(t["temperature"] for t in traces) == pytest.approx([0.0, 0.2, 0.4])


def test_a_streamed_request_gets_siblings(tmp_path: Path, upstream: FakeUpstreamHandle) -> None:
    with start(tmp_path, upstream) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused")
        stream = client.chat.completions.with_raw_response.create(
            model="flywheel", messages=MESSAGES, stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream.parse() if c.choices)
        traces = spool(tmp_path, wait_for=3)
    assert text == "echo: What is 53 * 47?"
    assert len(traces) == 3 and len({t["prompt_group"] for t in traces}) == 1
    assert sorted(t["temperature"] for t in traces) == [0.7, 0.9, 1.1]
    streamed = [t for t in traces if t["trace_id"] == stream.headers["x-trace-id"]]
    assert streamed and streamed[0]["temperature"] == 0.7
    assert streamed[0]["answer"] == text
    assert sorted(b.get("stream", False) for b in upstream.app.bodies) == [False, False, True]


def test_siblings_skipped_under_load_are_counted(
    tmp_path: Path, upstream: FakeUpstreamHandle, monkeypatch
) -> None:
    import infra.gateway.service as service

    monkeypatch.setattr(service, "MAX_BACKGROUND", 0)  # every background call is over the cap
    with start(tmp_path, upstream) as gw:
        resp = httpx.post(f"{gw.url}/v1/chat/completions", json={"messages": MESSAGES})
        assert resp.status_code == 200
        metrics = httpx.get(f"{gw.url}/metrics").text
        traces = spool(tmp_path, wait_for=1)
    assert "flywheel_diverse_siblings_skipped_total 2.0" in metrics
    assert len(traces) == 1 and len(upstream.app.bodies) == 1


def test_a_streams_siblings_wait_for_its_end_and_a_client_that_hangs_up_gets_none(
    tmp_path: Path,
) -> None:
    """Siblings start once the user's stream has ended well: none while it is still being
    written (they would compete with it for the same server), none at all for a client that
    hung up after the first words."""
    slow = start_fake_upstream("v0", keep_bodies=True, chunk_delay_s=0.2)
    try:
        with start(tmp_path, slow) as gw:
            body = {"model": "flywheel", "messages": MESSAGES, "stream": True}
            with httpx.stream("POST", f"{gw.url}/v1/chat/completions", json=body) as resp:
                lines = resp.iter_lines()
                assert next(lines).startswith("data: ")  # the first words, then hang up
                assert len(slow.app.bodies) == 1  # no sibling while the stream runs
            time.sleep(2.0)  # what the stream had left, and time for siblings to start
            assert len(slow.app.bodies) == 1
            with httpx.stream("POST", f"{gw.url}/v1/chat/completions", json=body) as resp:
                lines = resp.iter_lines()
                # the first words: the upstream is still writing (a chunk every 0.2 s), no
                # sibling yet. (Not at every line: once the gateway has written the last chunk
                # the stream has ended well and its siblings start, while this client, slowed
                # by the machine, may still be reading the last lines; CI-6 saw 4 there.)
                assert next(lines).startswith("data: ")
                assert len(slow.app.bodies) == 2
                rest = list(lines)
            assert "data: [DONE]" in rest  # read to its end
            traces = spool(tmp_path, wait_for=4)
        assert len(slow.app.bodies) == 4  # the whole stream read: its two siblings ran
        assert len(traces) == 4
    finally:
        slow.stop()
