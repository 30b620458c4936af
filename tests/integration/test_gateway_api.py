"""The gateway's OpenAI-compatible API on loopback, with fake OpenAI upstreams: the official
``openai`` client unchanged, traces in the spool, feedback, metrics, errors, diverse sampling."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.parts import Intervals
from infra.routing import RoutingState, save_state
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from tests.fakes.upstream import FakeUpstreamHandle, start_fake_upstream

pytestmark = pytest.mark.integration

MESSAGES = [
    {"role": "system", "content": "calculator: 53 * 47 = 2491"},
    {"role": "user", "content": "Hi, I'm Jane (jane@example.com). What is 53 * 47?"},
]


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstreamHandle]]:
    handles = {v: start_fake_upstream(v) for v in ("v0", "v1")}
    yield handles
    for handle in handles.values():
        handle.stop()


def start(tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle], **gw: Any) -> GatewayHandle:
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(
            upstreams={v: h.url for v, h in upstreams.items()},
            **{"diverse_fraction": 0.0, **gw},
        ),
    )
    store = LocalStore(tmp_path / "store")
    return start_background_gateway(
        settings, port=0, store=store, intervals=Intervals(state_s=0.1, flush_s=0.1), seed=0
    )


def spool(tmp_path: Path, kind: str = "trace", wait_for: int = 1) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while True:
        lines = [
            json.loads(line)
            for path in sorted((tmp_path / "store" / "traces").rglob("*.jsonl"))
            for line in path.read_text().splitlines()
        ]
        found = [x for x in lines if x["type"] == kind]
        if len(found) >= wait_for or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def metric(
    url: GatewayHandle | str, name: str, *, token: str | None = None, **labels: str
) -> float:
    """A sample of the public ``/metrics`` (with the admin ``token``: of the admin listener's
    ``/admin/metrics`` at ``url``, every series; ``url`` a gateway: its every series)."""
    if not isinstance(url, str):
        text = url.app.state.parts.metrics.render().decode()
    elif token is None:
        text = httpx.get(f"{url}/metrics").text
    else:
        auth = {"Authorization": f"Bearer {token}"}
        text = httpx.get(f"{url}/admin/metrics", headers=auth).text
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series == (f"{name}{{{want}}}" if labels else name):
            return float(value)
    return 0.0


def test_openai_client_chat_and_trace(tmp_path: Path, upstreams) -> None:
    upstreams["v0"].app.keep_bodies = True
    with start(tmp_path, upstreams) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused")
        raw = client.chat.completions.with_raw_response.create(
            model="flywheel", messages=MESSAGES, user="jane-1", extra_headers={"X-Session-Id": "s9"}
        )
        reply = raw.parse()
        trace_id = raw.headers["x-trace-id"]
        assert reply.choices[0].message.content == f"echo: {MESSAGES[1]['content']}"
        # the model as asked: a public answer never names the version that served it
        assert reply.model == "flywheel"
        assert reply.usage is not None and reply.usage.completion_tokens > 0
        [trace] = spool(tmp_path)
    assert trace["trace_id"] == trace_id
    assert trace["question"] == MESSAGES[1]["content"]  # full text: stage 3 removes the PII
    assert trace["contexts"] == [MESSAGES[0]["content"]]
    assert (trace["user_id"], trace["session_id"]) == ("jane-1", "s9")
    assert (trace["model_version"], trace["route"], trace["error_count"]) == ("v0", "stable", 0)
    assert trace["logprobs"] and trace["latency_s"] > 0
    # the user id is personal data: it never goes to the model server
    [sent] = upstreams["v0"].app.bodies
    assert "user" not in sent and sent["messages"] == MESSAGES


def test_openai_client_streaming(tmp_path: Path, upstreams) -> None:
    with start(tmp_path, upstreams) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused")
        stream = client.chat.completions.create(
            model="flywheel", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == f"echo: {MESSAGES[1]['content']}"
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].usage is not None  # include_usage honoured
        [trace] = spool(tmp_path)
    assert trace["answer"] == text and chunks[0].id == f"chatcmpl-{trace['trace_id']}"


def test_openai_client_lists_models(tmp_path: Path, upstreams) -> None:
    save_state(LocalStore(tmp_path / "store"), RoutingState(candidate="v1", weight=10))
    with start(tmp_path, upstreams) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused")
        # only what a public client may name: the canary is reached through routing
        assert {m.id for m in client.models.list()} == {"flywheel", "v0"}
        assert httpx.get(f"{gw.url}/healthz").json() == {"status": "ok", "stable": "v0"}


def test_feedback_is_recorded_and_counted(tmp_path: Path, upstreams) -> None:
    with start(tmp_path, upstreams) as gw:
        resp = httpx.post(f"{gw.url}/v1/chat/completions", json={"messages": MESSAGES})
        trace_id = resp.headers["x-trace-id"]
        ok = httpx.post(
            f"{gw.url}/v1/feedback", json={"trace_id": trace_id, "value": -1, "comment": "wrong"}
        )
        assert ok.status_code == 202
        assert (
            httpx.post(f"{gw.url}/v1/feedback", json={"trace_id": trace_id, "value": 5}).status_code
            == 400
        )
        assert metric(gw, "user_feedback_total", model="v0", value="-1", workload="default") == 1
        [event] = spool(tmp_path, "feedback")
    assert (event["trace_id"], event["value"], event["comment"]) == (trace_id, -1, "wrong")


def test_metrics_carry_the_design_names(tmp_path: Path, upstreams) -> None:
    save_state(
        LocalStore(tmp_path / "store"), RoutingState(candidate="v1", phase="canary", weight=100)
    )
    with start(tmp_path, upstreams) as gw:
        for _ in range(3):
            httpx.post(f"{gw.url}/v1/chat/completions", json={"messages": MESSAGES, "user": "u"})
        assert (
            metric(gw, "agent_requests_total", model="v1", route="canary", workload="default") == 3
        )
        assert (
            metric(
                gw,
                "agent_latency_seconds_count",
                model="v1",
                route="canary",
                workload="default",
            )
            == 3
        )
        assert metric(gw, "agent_errors_total", model="v1", route="canary", workload="default") == 0
        assert metric(gw, "flywheel_route_weight", model="v1") == 100
        assert metric(gw, "flywheel_route_weight", model="v0") == 0
        assert metric(gw, "flywheel_trace_sink_dropped_total") == 0


def test_bad_requests_and_unknown_models_get_openai_errors(tmp_path: Path, upstreams) -> None:
    token = "api-admin-token-0123456789abcdef0123456789"
    with start(tmp_path, upstreams, admin_token=token) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="v42", messages=MESSAGES)
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="flywheel", messages=[])
        with pytest.raises(openai.NotFoundError):  # not released: only the operator names it
            client.chat.completions.create(model="v1", messages=MESSAGES)
        operator = openai.OpenAI(base_url=f"{gw.admin_url}/v1", api_key=token, max_retries=0)
        pinned = operator.chat.completions.create(model="v1", messages=MESSAGES)
        assert pinned.model == "v1"
        # not released: its series are the operator's alone (admin listener)
        pinned_v1 = {"model": "v1", "route": "pinned", "workload": "default"}
        assert metric(gw.url, "agent_requests_total", **pinned_v1) == 0
        assert metric(str(gw.admin_url), "agent_requests_total", token=token, **pinned_v1) == 1
        [trace] = spool(tmp_path)
    assert (trace["model_version"], trace["route"]) == ("v1", "canary")  # not the stable one


def test_a_failing_stable_upstream_is_a_502_and_counted(tmp_path: Path, upstreams) -> None:
    upstreams["v0"].app.fail_rate = 1.0
    with start(tmp_path, upstreams) as gw:
        resp = httpx.post(f"{gw.url}/v1/chat/completions", json={"messages": MESSAGES})
        assert resp.status_code == 502 and resp.json()["error"]["type"] == "upstream_error"
        assert metric(gw, "agent_errors_total", model="v0", route="stable", workload="default") == 1
        [trace] = spool(tmp_path)
    assert trace["error_count"] == 1 and trace["answer"] == ""


@contextmanager
def failing_canary(
    tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle]
) -> Iterator[tuple[GatewayHandle, list[httpx.Response]]]:
    """The gateway with canary v1 at 100 % failing every call, after one plain and one
    streamed chat request."""
    upstreams["v1"].app.fail_rate = 1.0
    save_state(
        LocalStore(tmp_path / "store"), RoutingState(candidate="v1", phase="canary", weight=100)
    )
    with start(tmp_path, upstreams) as gw:
        replies = [
            httpx.post(
                f"{gw.url}/v1/chat/completions",
                json={"messages": MESSAGES, "user": "u", "stream": stream},
            )
            for stream in (False, True)
        ]
        yield gw, replies


def test_a_failing_canary_is_counted_and_the_user_served_by_stable(
    tmp_path: Path, upstreams
) -> None:
    with failing_canary(tmp_path, upstreams) as (gw, replies):
        for resp in replies:
            # served by stable (counted below); the user cannot tell the canary failed
            assert resp.status_code == 200 and "x-flywheel-model" not in resp.headers
        assert metric(gw, "agent_errors_total", model="v1", route="canary", workload="default") == 2
        assert (
            metric(gw, "agent_requests_total", model="v0", route="stable", workload="default") == 2
        )


def test_a_failing_canary_is_traced_the_same_streamed_or_not(tmp_path: Path, upstreams) -> None:
    with failing_canary(tmp_path, upstreams) as (_gw, replies):
        for resp in replies:
            assert resp.status_code == 200
        traces = spool(tmp_path, wait_for=4)
    by_route = sorted((t["route"], t["model_version"], t["error_count"]) for t in traces)
    assert by_route == [("canary", "v1", 1)] * 2 + [("stable", "v0", 0)] * 2
    assert all(t["pairing_id"] is None for t in traces)


def test_a_failing_canarys_time_is_not_charged_to_the_stable_answer(
    tmp_path: Path, upstreams
) -> None:
    """The canary takes a second to fail, then stable answers. The stable trace is stable's
    answer and its latency is stable's own call, streamed or not (the reward's latency term
    scores the version that answered); the second goes to the canary's failure trace. A JSON
    answer's trace once ran from the request's start, a stream's from the stable call."""
    upstreams["v1"].app.delay_s = 1.0
    with failing_canary(tmp_path, upstreams) as (_gw, replies):
        traces = spool(tmp_path, wait_for=4)
    by_id = {t["trace_id"]: t for t in traces}
    for resp in replies:
        assert resp.status_code == 200
        answer = by_id[resp.headers["x-trace-id"]]  # the stable version's
        assert answer["route"] == "stable"
        elapsed = resp.elapsed.total_seconds()  # the canary's second, then stable's answer
        assert answer["latency_s"] <= elapsed - 1.0, (answer["latency_s"], elapsed)
    assert all(t["latency_s"] >= 1.0 for t in traces if t["route"] == "canary")


def test_diverse_sampling_traces_siblings_in_one_prompt_group(tmp_path: Path, upstreams) -> None:
    upstreams["v0"].app.keep_bodies = True
    with start(tmp_path, upstreams, diverse_fraction=1.0) as gw:
        resp = httpx.post(f"{gw.url}/v1/chat/completions", json={"messages": MESSAGES})
        assert resp.status_code == 200
        traces = spool(tmp_path, wait_for=3)
    assert len(traces) == 3 and len({t["prompt_group"] for t in traces}) == 1
    assert sorted(t["temperature"] for t in traces) == [0.7, 0.9, 1.1]
    returned = [t for t in traces if t["trace_id"] == resp.headers["x-trace-id"]]
    assert returned and returned[0]["temperature"] == 0.7
    assert sorted(b["temperature"] for b in upstreams["v0"].app.bodies) == [0.7, 0.9, 1.1]


class FakeLM:
    """Stands in for infra.serving.local_lm.LocalLM (same methods): blocking, like the real one."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def render(self, messages: list[dict[str, Any]]) -> str:
        return f"Q: {messages[-1]['content']}\nA:"

    def generate_rows(self, prompts: list[str], rows: list[Any]) -> list[Any]:
        from infra.serving.local_lm import Generation

        self.threads.append(threading.current_thread().name)
        return [
            Generation(text="2491", tokens_in=len(p), tokens_out=4, logprobs=[-0.5] * 4)
            for p in prompts
        ]


def test_embedded_model_is_served_off_the_event_loop(tmp_path: Path, monkeypatch) -> None:
    from infra.upstream.upstreams import LocalUpstream

    lm = FakeLM()
    monkeypatch.setattr(LocalUpstream, "_load", lambda self: lm)
    settings = Settings(home=tmp_path, gateway=GatewaySettings(diverse_fraction=0.0))
    store = LocalStore(tmp_path / "store")
    with start_background_gateway(
        settings, port=0, store=store, intervals=Intervals(flush_s=0.1)
    ) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused")
        reply = client.chat.completions.create(model="flywheel", messages=MESSAGES)
        streamed = client.chat.completions.create(model="flywheel", messages=MESSAGES, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        [trace, _] = spool(tmp_path, wait_for=2)
    assert reply.choices[0].message.content == text == "2491"
    assert trace["logprobs"] == [-0.5] * 4 and trace["tokens_out"] == 4
    assert lm.threads and "uvicorn" not in " ".join(lm.threads)  # never on the loop's thread


def test_a_missing_embedded_model_is_a_clear_error(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, gateway=GatewaySettings(diverse_fraction=0.0))
    with start_background_gateway(settings, port=0, store=LocalStore(tmp_path / "store")) as gw:
        resp = httpx.post(f"{gw.url}/v1/chat/completions", json={"messages": MESSAGES})
    assert resp.status_code == 502
    assert "v0" in resp.json()["error"]["message"] and "does not exist" in resp.text
