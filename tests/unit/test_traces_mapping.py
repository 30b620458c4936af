"""Langfuse JSON -> trace record fields (infra.traces.mapping), without a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from infra.errors import SourceError, SourceUnavailable, TransientError
from infra.traces import parse_trace
from infra.traces.mapping import (
    feedback_value,
    generation_metadata,
    iso_utc,
    pick_generation,
    record_fields,
)
from tests.helpers import make_trace

T0 = datetime(2025, 3, 1, 10, tzinfo=UTC)


def generation(obs_id: str, start: str, **extra: object) -> dict[str, object]:
    return {"id": obs_id, "type": "GENERATION", "startTime": start, **extra}


def test_the_root_generation_is_the_record_else_the_latest() -> None:
    root = generation("a", "2025-03-01T10:00:00Z")
    child = generation("b", "2025-03-01T10:00:05Z", parentObservationId="a")
    span = {"id": "c", "type": "SPAN", "startTime": "2025-03-01T10:00:09Z"}
    assert pick_generation([child, root, span]) is root
    later = generation("d", "2025-03-01T10:00:07Z", parentObservationId="a")
    assert pick_generation([child, later, span]) is later
    assert pick_generation([span]) is None


def test_v2_string_fields_are_decoded_into_a_valid_record() -> None:
    messages = [
        {"role": "system", "content": "You add numbers."},
        {"role": "user", "content": [{"type": "text", "text": "What is 2+3?"}]},
    ]
    call = {"id": "call-1", "type": "function", "function": {"name": "add"}}
    gen = generation(
        "g",
        "2025-03-01T10:00:00Z",
        endTime="2025-03-01T10:00:01.500Z",
        input=json.dumps(messages),
        output=json.dumps({"role": "assistant", "content": "5", "tool_calls": [call]}),
        metadata={"prompt_group": "pg-1", "route": "canary", "contexts": '["2+3=5"]'},
        modelParameters={"temperature": "0.7"},
        usageDetails={"input": 12, "output": 1},
        model="v3",
        userId="u-1",
    )
    tool = {"id": "t", "type": "TOOL", "name": "add", "input": '{"a": 2}', "output": "5"}
    error = {"id": "e", "type": "EVENT", "level": "ERROR"}
    fields = record_fields(trace_id="tr-1", gen=gen, group=[gen, tool, error])
    record = parse_trace(json.dumps(fields).encode(), max_bytes=100_000)
    assert record.question == "What is 2+3?"
    assert record.contexts == ["2+3=5"]
    assert record.answer == "5"
    assert record.tool_calls == [call, {"name": "add", "input": {"a": 2}, "output": 5}]
    assert (record.prompt_group, record.route, record.model_version) == ("pg-1", "canary", "v3")
    assert record.latency_s == pytest.approx(1.5)
    assert (record.tokens_in, record.tokens_out, record.error_count) == (12, 1, 1)
    assert record.created_at == T0


def test_a_generation_without_a_user_message_is_refused_without_quoting_it() -> None:
    gen = generation("g", "2025-03-01T10:00:00Z", input=[{"role": "system", "content": "secret"}])
    with pytest.raises(ValueError, match="no question") as err:
        record_fields(trace_id="tr-1", gen={**gen, "output": "x"}, group=[gen])
    assert "secret" not in str(err.value)


def test_what_the_writer_puts_in_metadata_reads_back_as_the_same_record() -> None:
    record = make_trace(1, T0, route="shadow", pairing_id="pair-9", logprobs=[-0.1, -0.2])
    gen = generation(
        "g",
        record.created_at.isoformat(),
        input={"question": record.question, "contexts": record.contexts},
        output=record.answer,
        metadata={k: json.dumps(v) for k, v in generation_metadata(record).items()},
        latency=record.latency_s,
    )
    fields = record_fields(trace_id=record.trace_id, gen=gen, group=[gen])
    back = parse_trace(fields, max_bytes=100_000)
    for name in ("prompt_group", "route", "pairing_id", "model_version", "logprobs", "contexts"):
        assert getattr(back, name) == getattr(record, name), name
    assert (back.question, back.answer) == (record.question, record.answer)


@pytest.mark.parametrize(
    ("score", "value"),
    [
        ({"dataType": "NUMERIC", "value": 0.4}, 1),
        ({"dataType": "NUMERIC", "value": 0}, 0),
        ({"dataType": "NUMERIC", "value": -2}, -1),
        ({"dataType": "BOOLEAN", "value": False}, -1),
        ({"dataType": "BOOLEAN", "value": 1}, 1),
        ({"dataType": "CATEGORICAL", "value": "good"}, None),
    ],
)
def test_feedback_scores_map_by_sign(score: dict[str, object], value: int | None) -> None:
    assert feedback_value(score) == value


def test_v1_time_filters_are_utc_with_a_z() -> None:
    assert iso_utc(datetime.fromisoformat("2025-03-01T11:30:00+01:00")) == "2025-03-01T10:30:00Z"


def test_an_endpoint_missing_on_the_server_is_not_retried() -> None:
    err = SourceUnavailable("v2 observations page", 404)
    assert isinstance(err, SourceError) and not isinstance(err, TransientError)
    assert err.status == 404 and "HTTP 404" in str(err)
