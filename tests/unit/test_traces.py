from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from infra.store import LocalStore
from infra.traces import FeedbackEvent, SpoolSource, SpoolWriter, parse_trace
from tests.helpers import make_trace

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
EMAIL = "jane.roe@example.com"


def test_parse_reasons_never_quote_values() -> None:
    bad_type = json.dumps({**make_trace(1, T0).model_dump(mode="json"), "latency_s": EMAIL})
    with pytest.raises(ValueError) as err:
        parse_trace(bad_type.encode(), max_bytes=10_000)
    assert "latency_s" in str(err.value)
    assert EMAIL not in str(err.value)


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (b"{not json", "bad JSON"),
        (b"\xff\xfe" + EMAIL.encode(), "invalid UTF-8"),
        (b"[1, 2]", "expected a JSON object"),
        (json.dumps({"trace_id": "x", "question": EMAIL}).encode(), "answer: missing"),
        (b"x" * 2_000, "too large"),
    ],
)
def test_parse_rejects_with_reason(payload: bytes, needle: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_trace(payload, max_bytes=1_000)
    assert needle in str(err.value)
    assert EMAIL not in str(err.value)


def test_naive_timestamp_is_rejected() -> None:
    row = make_trace(1, T0).model_dump(mode="json")
    row["created_at"] = "2026-11-22T10:00:00"
    with pytest.raises(ValueError, match="created_at"):
        parse_trace(row, max_bytes=10_000)


def test_spool_roundtrip_window_bounds_and_latest_feedback(tmp_path) -> None:
    store = LocalStore(tmp_path)
    writer = SpoolWriter(store, max_lines=3)
    for i in range(10):
        writer.write_trace(make_trace(i, T0))
    writer.write_trace(make_trace(99, T0.replace(hour=11)))  # next window
    writer.write_feedback(FeedbackEvent(trace_id="trace-00002", value=-1, at=T0))
    writer.write_feedback(FeedbackEvent(trace_id="trace-00002", value=1, at=T0.replace(minute=30)))
    writer.flush()
    batch = SpoolSource(store, max_record_bytes=100_000).read_window(T0, T0.replace(hour=11))
    assert sorted(r.trace_id for r in batch.records) == [f"trace-{i:05d}" for i in range(10)]
    assert {r.trace_id: r.feedback for r in batch.records}["trace-00002"] == 1
    assert batch.invalid == []
