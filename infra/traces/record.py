"""The trace record every source is normalised to (docs/stages/collect.md), the feedback
event recorded later, what a source returns for a window, and the two adapter protocols: a
:class:`TraceSource` reads a window, a :class:`TraceSink` receives what the gateway records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Protocol, TypedDict

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetPydanticSchema,
    ValidationError,
    field_validator,
    model_validator,
)

from infra.traces.conversation import (
    DEFAULT_WORKLOAD,
    JsonObject,
    Messages,
    ToolCall,
    context_texts,
    last_user_text,
    legacy_messages,
)

# A typed list validated as the list of JSON objects it is: pydantic checks each entry is an
# object (arbitrary JSON to pydantic: JsonObject) and keeps it exactly as sent (every key, any
# content), while mypy reads the TypedDict.
AS_JSON_OBJECTS = GetPydanticSchema(lambda _type, handler: handler(list[JsonObject]))


class ToolRun(TypedDict):
    """A tool the agent ran, as a Langfuse TOOL observation of its trace records it: a record
    read from Langfuse lists these after the answer's own tool calls."""

    name: str | None
    input: Any  # arbitrary JSON: whatever the tool was given
    output: Any  # arbitrary JSON: whatever it returned


class TraceRecord(BaseModel):
    """One agent interaction (docs/stages/collect.md).

    ``messages`` is exactly what the model was sent (OpenAI chat messages: system, user,
    assistant with ``tool_calls``, tool results); ``answer`` and ``tool_calls`` are what it
    returned. ``question`` (the last user turn) and ``contexts`` (tool and retrieval results)
    are derived from the messages when not given; an old record without ``messages`` gets the
    conversation its question and contexts stand for (:func:`legacy_messages`).
    """

    model_config = ConfigDict(extra="ignore")

    trace_id: str = Field(min_length=1, max_length=128)
    session_id: str | None = None
    user_id: str | None = None
    workload: str = Field(default=DEFAULT_WORKLOAD, min_length=1, max_length=128)
    prompt_group: str = Field(min_length=1, max_length=128)
    messages: Annotated[Messages, AS_JSON_OBJECTS] = []
    question: str
    contexts: list[str] = []
    answer: str
    tool_calls: Annotated[list[ToolCall | ToolRun], AS_JSON_OBJECTS] = []
    model_version: str = Field(min_length=1)
    temperature: float | None = Field(default=None, ge=0.0, le=5.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    latency_s: float = Field(ge=0.0)
    tokens_in: int | None = Field(default=None, ge=0)
    tokens_out: int | None = Field(default=None, ge=0)
    finish_reason: str | None = None
    error_count: int = Field(default=0, ge=0)
    feedback: Literal[-1, 0, 1] | None = None
    created_at: datetime
    # gateway extras: which route served it, the shadow pairing id, token logprobs
    route: Literal["stable", "canary", "shadow"] = "stable"
    pairing_id: str | None = None
    logprobs: list[float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _conversation(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        messages = data.get("messages")
        if isinstance(messages, str):  # rollouts and training_examples keep them as JSON
            try:
                messages = json.loads(messages)
            except ValueError:
                return data  # field validation names it: "messages: list_type"
        if messages:
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                return data  # field validation names the error
            data = {**data, "messages": messages}
            if data.get("question") is None:
                data["question"] = last_user_text(messages)
            if data.get("contexts") is None:
                data["contexts"] = context_texts(messages)
        elif isinstance(data.get("question"), str):
            contexts = data.get("contexts") or []
            if isinstance(contexts, list) and all(isinstance(c, str) for c in contexts):
                data = {**data, "messages": legacy_messages(data["question"], contexts)}
        if data.get("workload") in (None, ""):
            data = {**data, "workload": DEFAULT_WORKLOAD}
        return data

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("created_at must carry a timezone")
        return value.astimezone(UTC)


class FeedbackEvent(BaseModel):
    """A user's vote on a trace: +1 (up), 0 (neutral) or -1 (down), when it was given, and an
    optional comment."""

    trace_id: str
    value: Literal[-1, 0, 1]
    at: datetime
    comment: str | None = None


@dataclass
class RawLine:
    """One line from a source with where it came from (for quarantine pointers)."""

    source: str
    payload: bytes | dict[str, Any]


@dataclass
class WindowBatch:
    """What a source returns for a window: parsed records, the lines it could not parse, and
    how many traces it left out on purpose, by reason (e.g. ``no_generation``)."""

    records: list[TraceRecord] = field(default_factory=list)
    invalid: list[tuple[RawLine, str]] = field(default_factory=list)  # (line, reason)
    dropped: dict[str, int] = field(default_factory=dict)


class TraceSource(Protocol):
    """Reads every trace whose ``created_at`` is in ``[start, end)`` with its latest feedback."""

    def read_window(self, start: datetime, end: datetime) -> WindowBatch:
        """The traces created in ``[start, end)`` with their latest feedback, and the lines that did
        not parse."""

    def read_feedback(self, start: datetime, end: datetime) -> dict[str, Literal[-1, 0, 1]]:
        """The latest feedback per trace id among feedback given in ``[start, end)``."""
        ...


class TraceSink(Protocol):
    """Receives records from the gateway's dispatcher thread; ``flush`` makes them durable.

    A sink whose ``write_*`` only buffer in memory (no I/O) says so with a class attribute
    ``writes_in_memory = True``: the dispatcher then calls them on the event loop and only
    ``flush``/``close`` in its thread."""

    def write_trace(self, record: TraceRecord) -> None:
        """Accept one trace record."""

    def write_feedback(self, event: FeedbackEvent) -> None:
        """Accept one feedback event."""

    def flush(self) -> None:
        """Make everything accepted so far durable."""

    def close(self) -> None:
        """Flush and release the sink's resources."""


def parse_trace(payload: bytes | dict[str, Any], *, max_bytes: int) -> TraceRecord:
    """Validate one raw trace; raises ValueError with a reason that never quotes field values."""
    if isinstance(payload, bytes):
        if len(payload) > max_bytes:
            raise ValueError(f"record too large ({len(payload)} bytes > {max_bytes})")
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"invalid UTF-8 at byte {exc.start}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"bad JSON: {exc.msg} at column {exc.colno}") from None
    else:
        data = payload
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    try:
        return TraceRecord.model_validate(data)
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    """Field paths and error kinds only: pydantic's default message quotes the input (PII)."""
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['type']}" for e in exc.errors()]
    return "invalid fields: " + "; ".join(parts[:8])
