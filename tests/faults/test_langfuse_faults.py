"""Stage 1's Langfuse source behind a proxy answering 30 % of calls with 429 (Retry-After) or
503: the window read is the one read without faults, each trace once, every retry counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from infra.retries import RETRIES
from infra.traces.langfuse_reader import LangfuseSource
from tests.fakes.faults import fault_proxy
from tests.fakes.langfuse import FakeLangfuseServer

pytestmark = pytest.mark.integration
START = datetime(2025, 3, 4, 10, tzinfo=UTC)
END = START + timedelta(hours=1)


def _read(url: str, fake: FakeLangfuseServer) -> list[dict[str, Any]]:
    with LangfuseSource(
        host=url,
        public_key=fake.public_key,
        secret_key=fake.secret_key,
        page_size=10,
        backoff_s=0.01,
    ) as source:
        batch = source.read_window(START, END)
    return sorted((r.model_dump(mode="json") for r in batch.records), key=lambda r: r["trace_id"])


def test_a_window_read_through_429_and_5xx_equals_a_clean_read() -> None:
    body = b'{"message": "injected"}'
    with FakeLangfuseServer() as fake:
        fake.seed(60, start=START + timedelta(seconds=20), spacing=timedelta(seconds=55))
        clean = _read(fake.url, fake)
        with fault_proxy(fake.url, rate=0.3, seed=4, kinds=("throttle", "before"), body=body) as p:
            before = RETRIES.snapshot()
            faulty = _read(p.url, fake)
            retries = RETRIES.since(before)

    assert faulty == clean and len(clean) == 60
    assert len({r["trace_id"] for r in faulty}) == len(faulty)  # each trace once
    assert p.faults["throttle"] > 0 and p.faults["before"] > 0
    langfuse = sum(n for op, n in retries.items() if op.startswith("langfuse"))
    assert langfuse >= sum(p.faults.values())
