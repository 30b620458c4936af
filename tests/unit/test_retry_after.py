"""``Retry-After`` is read one way by every adapter (the model server's, Langfuse's, the
judge's): delay seconds or an HTTP date, and nothing a server sends (``inf``, a negative
number, garbage) becomes a wait that stops retries or waits forever."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from pydantic import BaseModel

from infra.errors import JudgeError
from infra.llm import ChatClient, judge_backoff
from infra.retries import retry_after_seconds
from infra.traces.langfuse_http import translate_status
from infra.upstream.statuses import status_error

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
IN_AN_HOUR = format_datetime(NOW + timedelta(hours=1), usegmt=True)

READINGS = {
    "30": 30.0,
    " 7 ": 7.0,
    "1.5": 1.5,  # not RFC 9110, but servers send it
    IN_AN_HOUR: 3600.0,
    format_datetime(NOW - timedelta(hours=1), usegmt=True): 0.0,  # a date gone by: no wait
    "Wed, 02 Dec 2026 13:00:00 -0000": 3600.0,  # no zone named: GMT
    "inf": None,
    "nan": None,
    "-3": None,
    "1e999": None,
    "soon": None,
    "": None,
}


@pytest.mark.parametrize("value", list(READINGS))
def test_one_reading_of_retry_after(value: str) -> None:
    assert retry_after_seconds(value, now=NOW) == READINGS[value]
    assert retry_after_seconds(value.encode(), now=NOW) == READINGS[value]


def test_the_model_server_and_langfuse_errors_carry_the_same_wait() -> None:
    for value in ("30", "1.5", "inf", "-3"):
        upstream = status_error("v1", 429, [(b"retry-after", value.encode())], b"", hide=())
        langfuse = translate_status(429, {"retry-after": value}, what="a page", host="h")
        assert upstream.retry_after_s == retry_after_seconds(value)
        assert getattr(langfuse, "retry_after_s", None) == retry_after_seconds(value)


class Verdict(BaseModel):
    score: float


def test_a_judge_answering_retry_after_inf_is_still_retried() -> None:
    """Read as a float, ``inf`` was a wait past the longest honoured: the judge gave up at the
    first 429. Now it is no wait at all, and the usual backoff applies."""
    calls = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            return httpx.Response(429, headers={"retry-after": "inf"})
        content = '{"score": 1}'
        return httpx.Response(200, json={"choices": [{"message": {"content": content}}]})

    client = ChatClient(
        base_url="http://judge.invalid/v1",
        model="judge",
        retry=judge_backoff(max_retries=1, base_s=0.01),
        transport=httpx.MockTransport(answer),
    )
    try:
        verdict = asyncio.run(client.chat_json([{"role": "user", "content": "?"}], Verdict))
    except JudgeError as exc:  # pragma: no cover - the failure this test exists for
        pytest.fail(f"gave up after {len(calls)} call(s): {exc}")
    assert verdict.score == 1 and len(calls) == 2
