"""Simulated users against a small OpenAI-compatible fake gateway on loopback (real HTTP)."""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from infra.catalog import open_catalog, scan
from infra.privacy import user_key
from infra.settings import Settings
from tasks.demo import domain
from tasks.demo.simulate import (
    Connection,
    Crowd,
    build_population,
    plan_requests,
    record_consent,
    simulate,
)

pytestmark = pytest.mark.integration


class FakeGateway:
    """Speaks OpenAI chat completions + the feedback endpoint; answers half the questions
    right (deterministically by text), issues an X-Trace-Id per completion."""

    def __init__(self) -> None:
        self.chats: list[dict[str, Any]] = []
        self.feedback: list[dict[str, Any]] = []
        self.answers: dict[str, bool] = {}  # trace id -> answered correctly

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            question = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
            a, b = domain.parse_operands(question) or (0, 0)
            right = hashlib.sha256(question.encode()).digest()[0] % 2 == 0
            trace_id = uuid.uuid4().hex
            self.chats.append({"body": body, "session": request.headers.get("x-session-id")})
            self.answers[trace_id] = right
            message = {"role": "assistant", "content": str(a + b if right else a + b + 1)}
            payload = {
                "id": f"chatcmpl-{trace_id}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "v0",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            }
            return JSONResponse(payload, headers={"X-Trace-Id": trace_id})

        @app.post("/v1/feedback")
        async def feedback(request: Request) -> dict[str, bool]:
            self.feedback.append(await request.json())
            return {"ok": True}

        return app


@pytest.fixture
def gateway() -> Iterator[tuple[str, FakeGateway]]:
    import uvicorn

    fake = FakeGateway()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(fake.app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", fake
    server.should_exit = True
    thread.join(timeout=5)
    sock.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # the calculator agent alone: this fake gateway answers additions
    return Settings(home=tmp_path / "home", user_salt="test-salt", workloads=["calculator"])


def test_users_ask_through_the_openai_api_with_pii_consent_and_feedback(
    gateway: tuple[str, FakeGateway], settings: Settings
) -> None:
    url, fake = gateway
    catalog = open_catalog(settings)
    summary = simulate(
        url,
        requests=150,
        concurrency=6,
        seed=3,
        crowd=Crowd(n_users=40, population_seed=3),
        catalog=catalog,
        settings=settings,
    )
    assert (summary.succeeded, summary.failed) == (150, 0)
    assert len(fake.chats) == 150
    assert summary.describe().startswith("150 requests (150 ok, 0 failed)")

    users = {u.user_id: u for u in build_population(40, seed=3)}
    leaked = 0
    for chat in fake.chats:
        body = chat["body"]
        assert body["model"] == "flywheel"
        user = users[body["user"]]
        assert chat["session"].startswith(user.user_id)
        # the request's own question (a follow-up carries the earlier turns before it)
        question = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        tool = body["messages"][-1]
        a, b = domain.parse_operands(question) or (0, 0)
        assert not domain.is_golden_pair(a, b)
        assert tool["role"] == "tool" and tool["content"] == domain.calculator_context(a, b)
        leaked += any(value in question for value in user.pii().values())
    assert 0.15 * 150 < leaked < 0.85 * 150  # personal data in many questions, not all
    assert leaked == summary.requests_with_pii

    consent = scan(catalog, "consent").to_pylist()
    assert len(consent) == 40
    assert sum(not row["consent_to_training"] for row in consent) == 4
    keys = {user_key(uid, "test-salt"): u.opted_out for uid, u in users.items()}
    assert all(keys[row["user_key"]] == (not row["consent_to_training"]) for row in consent)
    assert summary.opted_out_requests > 0  # opted-out users do send traffic

    assert 0.15 * 150 < len(fake.feedback) < 0.45 * 150
    assert sum(summary.feedback.values()) == len(fake.feedback)
    votes = [(fake.answers[f["trace_id"]], f["value"]) for f in fake.feedback]
    up_when_right = [v == 1 for right, v in votes if right and v != 0]
    down_when_wrong = [v == -1 for right, v in votes if not right and v != 0]
    assert sum(up_when_right) / len(up_when_right) > 0.75
    assert sum(down_when_wrong) / len(down_when_wrong) > 0.75
    assert 0.3 < summary.accuracy < 0.7


def test_a_rerun_is_reproducible_and_writes_no_duplicate_consent(settings: Settings) -> None:
    users = build_population(30, seed=9)
    assert [u.user_id for u in users] == [u.user_id for u in build_population(30, seed=9)]
    plan = [r.text for r in plan_requests(users, requests=50, seed=9)]
    assert plan == [r.text for r in plan_requests(users, requests=50, seed=9)]
    catalog = open_catalog(settings)
    assert record_consent(catalog, users, salt="s") == 30
    assert record_consent(catalog, users, salt="s") == 0
    raw_ids = {u.user_id for u in users}
    assert not raw_ids & {row["user_key"] for row in scan(catalog, "consent").to_pylist()}


def test_an_unreachable_gateway_is_counted_not_raised(settings: Settings) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    summary = simulate(
        f"http://127.0.0.1:{port}/v1",
        requests=4,
        concurrency=4,
        seed=0,
        crowd=Crowd(n_users=10),
        settings=settings,
        connection=Connection(timeout_s=5),
    )
    assert (summary.succeeded, summary.failed) == (0, 4)
    assert re.fullmatch(r"[0-9a-f]{64}", user_key("u", "s"))
