"""Langfuse JSON <-> :class:`~infra.traces.record.TraceRecord` fields, shared by the reader
(:mod:`infra.traces.langfuse_reader`) and the writer (:mod:`infra.traces.langfuse_writer`).

Mapping (one Langfuse trace = one record; the gateway emits one trace per sampled sibling):

- the record's observation is the trace's GENERATION (or a span carrying OpenTelemetry
  ``gen_ai.prompt.*`` attributes): the root one if any, else the latest (an agent's last LLM
  call, after its tool spans); traces without one are not agent interactions and are dropped,
  counted as ``no_generation`` (``WindowBatch.dropped``)
- ``trace_id`` <- traceId; ``created_at`` <- the generation's startTime; window membership is
  the generation's startTime (v2) or the trace timestamp (v1), exactly what the server filters on
- ``messages`` <- the input (OpenAI messages, or ``{"messages": [...]}``; a plain string is one
  user turn; ``{"question", "contexts"}`` is an old record), else the ``gen_ai.prompt.N.*``
  attributes (:mod:`infra.traces.otel`); ``question`` <- its last ``user`` message
- ``contexts`` <- ``metadata.contexts`` when present, else the messages' ``system``/``tool``
  turns, plus the outputs of the trace's RETRIEVER observations
- ``answer`` <- the output (a string, an assistant message, an OpenAI completion, or
  ``{"answer": ...}``; any other JSON value is a structured answer, kept as its JSON text;
  else ``gen_ai.completion.0.*``); ``tool_calls`` <- the output message's ``tool_calls`` plus
  the trace's TOOL observations (name, input, output)
- ``workload``, ``finish_reason`` <- the ``META_*`` metadata keys (``finish_reason`` also from
  an OpenAI completion output)
- ``prompt_group``, ``route``, ``pairing_id``, ``model_version``, ``logprobs`` <- the
  ``META_*`` metadata keys below (``prompt_group`` defaults to the trace id; ``model_version``
  to the observation's version, then its model name; ``route`` to ``stable``)
- ``temperature``/``top_p`` <- modelParameters; ``tokens_in``/``tokens_out`` <- usageDetails
  ``input``/``output`` (or v1 ``usage``); ``latency_s`` <- latency (else end - start)
- ``user_id``/``session_id`` <- userId/sessionId (of the observation, else of the v1 trace)
- ``error_count`` <- observations of the trace at level ERROR
- ``feedback`` <- the scores named in ``FLYWHEEL_FEEDBACK__SCORE_NAMES`` (default
  ``user_feedback``): NUMERIC by thresholds (``>= up_at`` +1, ``<= down_at`` -1, else 0; 0.2 is
  neutral by default), BOOLEAN true +1, false -1, CATEGORICAL by the ``categories`` table
  (``positive`` +1, ``negative`` -1, ...; unknown categories are ignored)

Metadata values may arrive as strings (the v2 API returns input/output as raw strings and
metadata as a string map); JSON-looking strings are decoded. A trace that cannot be mapped or
fails :func:`~infra.traces.record.parse_trace` is reported in ``WindowBatch.invalid`` with a
reason that names fields, never their values; its raw line is the generation as Langfuse
returned it (contains PII).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, cast

from infra.traces import otel
from infra.traces.conversation import (
    Message,
    Messages,
    context_texts,
    last_user_text,
    legacy_messages,
)

if TYPE_CHECKING:
    from infra.settings import FeedbackSettings
    from infra.traces.observation import Observation
    from infra.traces.record import TraceRecord

Feedback = Literal[-1, 0, 1]


# Metadata keys the gateway writes on each generation (import these, do not retype them).
META_PROMPT_GROUP = "prompt_group"
META_ROUTE = "route"
META_PAIRING_ID = "pairing_id"
META_CONTEXTS = "contexts"
META_MODEL_VERSION = "model_version"
META_LOGPROBS = "logprobs"
META_WORKLOAD = "workload"
META_FINISH_REASON = "finish_reason"
FEEDBACK_SCORE_NAME = "user_feedback"


def generation_metadata(record: TraceRecord) -> dict[str, Any]:
    """The ``META_*`` metadata the writer puts on a record's generation (``None`` left out)."""
    meta = {
        META_PROMPT_GROUP: record.prompt_group,
        META_ROUTE: record.route,
        META_PAIRING_ID: record.pairing_id,
        META_CONTEXTS: record.contexts,
        META_MODEL_VERSION: record.model_version,
        META_LOGPROBS: record.logprobs,
        META_WORKLOAD: record.workload,
        META_FINISH_REASON: record.finish_reason,
    }
    return {k: v for k, v in meta.items() if v is not None}


def pick_generation(group: list[Observation]) -> Observation | None:
    """A trace's record observation: its root GENERATION, else the latest; None without one."""
    gens = [o for o in group if otel.is_generation(o)]
    roots = [o for o in gens if o.get("isRootObservation") or not o.get("parentObservationId")]
    pool = roots or gens
    return max(pool, key=lambda o: (str(o.get("startTime")), o["id"])) if pool else None


def record_fields(*, trace_id: str, gen: Observation, group: list[Observation]) -> dict[str, Any]:
    """The TraceRecord fields of one generation; ValueError reasons never quote values."""
    meta = _decode(gen.get("metadata"))
    meta = {k: _decode(v) for k, v in meta.items()} if isinstance(meta, dict) else {}
    attrs = otel.attributes(meta)
    messages, input_contexts = _messages(_decode(gen.get("input")), attrs)
    question = last_user_text(messages) if messages else None
    if not question and not any(m.get("role") == "user" for m in messages):
        raise ValueError("no question: the generation input has no user message")
    output = _decode(gen.get("output"))
    if output is None or output == "":
        output = otel.completion_message(attrs)
    answer = _answer(output)
    if answer is None:
        raise ValueError("no answer: the generation has no output")
    contexts = meta.get(META_CONTEXTS, input_contexts)
    if isinstance(contexts, str):
        contexts = [contexts]
    if META_CONTEXTS not in meta:
        contexts = list(contexts) + _retrieved(group)
    params = _decode(gen.get("modelParameters"))
    params = params if isinstance(params, dict) else {}
    usage = gen.get("usageDetails") or gen.get("usage") or otel.usage(attrs)
    latency = gen.get("latency")
    if latency is None and gen.get("endTime"):
        latency = (parse_time(gen["endTime"]) - parse_time(gen["startTime"])).total_seconds()
    tools = [
        {
            "name": o.get("name"),
            "input": _decode(o.get("input"), loose=True),
            "output": _decode(o.get("output"), loose=True),
        }
        for o in group
        if o.get("type") == "TOOL"
    ]
    if isinstance(output, dict) and isinstance(output.get("tool_calls"), list):
        tools = output["tool_calls"] + tools
    model = meta.get(META_MODEL_VERSION) or gen.get("version") or gen.get("model")
    return {
        "trace_id": trace_id,
        "session_id": gen.get("sessionId"),
        "user_id": gen.get("userId"),
        "workload": meta.get(META_WORKLOAD),
        "prompt_group": meta.get(META_PROMPT_GROUP) or trace_id,
        "messages": messages,
        "question": question or "",
        "contexts": contexts,
        "answer": answer,
        "tool_calls": tools,
        "model_version": model or otel.model(attrs),
        "temperature": params.get("temperature"),
        "top_p": params.get("top_p"),
        "latency_s": latency,
        "tokens_in": usage.get("input"),
        "tokens_out": usage.get("output"),
        "finish_reason": meta.get(META_FINISH_REASON) or _finish_reason(output),
        "error_count": sum(o.get("level") == "ERROR" for o in group),
        "created_at": gen.get("startTime"),
        "route": meta.get(META_ROUTE) or "stable",
        "pairing_id": meta.get(META_PAIRING_ID),
        "logprobs": meta.get(META_LOGPROBS),
    }


def _messages(value: Any, attrs: dict[str, Any]) -> tuple[Messages, list[str]]:
    """The conversation of a generation input and the contexts it carries."""
    if isinstance(value, dict) and "messages" in value:
        value = value["messages"]
    if value is None or value == "" or value == []:
        value = otel.prompt_messages(attrs)
    if isinstance(value, str):
        return [{"role": "user", "content": value}], []
    if isinstance(value, dict) and "question" in value:  # an old flywheel record
        contexts = value.get("contexts") or []
        contexts = [c for c in (contexts if isinstance(contexts, list) else [contexts])]
        question = _text(value["question"]) or ""
        return legacy_messages(question, [str(c) for c in contexts]), [str(c) for c in contexts]
    if not isinstance(value, list):
        return [], []
    messages = [
        cast("Message", m) for m in value if isinstance(m, dict) and isinstance(m.get("role"), str)
    ]
    return messages, context_texts(messages)


def _retrieved(group: list[Observation]) -> list[str]:
    """Outputs of the trace's RETRIEVER observations (documents), as texts, in time order."""
    out: list[str] = []
    spans = sorted(
        (o for o in group if o.get("type") == "RETRIEVER"), key=lambda o: str(o.get("startTime"))
    )
    for span in spans:
        value = _decode(span.get("output"))
        if isinstance(value, dict) and "documents" in value:
            value = value["documents"]
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, dict):
                item = item.get("page_content") or item.get("content") or item.get("text") or item
            if item is not None:
                out.append(item if isinstance(item, str) else json.dumps(item, sort_keys=True))
    return out


def _finish_reason(output: Any) -> str | None:
    if isinstance(output, dict):
        choices = output.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            return choices[0].get("finish_reason")
        return output.get("finish_reason")
    return None


def _answer(value: Any) -> str | None:
    """The answer text; a structured (JSON) answer as its JSON text; None without output."""
    if value is None:
        return None
    if isinstance(value, list):
        turns = [m for m in value if isinstance(m, dict) and m.get("role") == "assistant"]
        if not turns:  # a JSON array answer, e.g. [1, 2, 3]
            return json.dumps(value)
        value = turns[-1]
    if isinstance(value, dict):
        if isinstance(value.get("choices"), list) and value["choices"]:
            value = (value["choices"][0] or {}).get("message") or {}
        for key in ("content", "answer", "text"):
            if key in value and value[key] is not None:
                return (
                    _text(value[key])
                    if not isinstance(value[key], dict)
                    else json.dumps(value[key])
                )
        if value.get("role") == "assistant":  # a tool-call-only turn
            return "" if value.get("tool_calls") else None
        return json.dumps(value)  # a JSON object answer, e.g. {"result": 5}
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return json.dumps(value)  # Langfuse stores a numeric-looking output as a JSON number
    return value if isinstance(value, str) else None


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(p for p in parts if isinstance(p, str))
    return None


def _decode(value: Any, *, loose: bool = False) -> Any:
    """Decode JSON-looking strings (v2 returns io raw and metadata as a string map); ``loose``
    also decodes scalars ("42" -> 42), for tool io where v1 and v2 must agree."""
    if isinstance(value, str) and (loose or value[:1] in ("{", "[", '"')):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def feedback_value(
    score: dict[str, Any], mapping: FeedbackSettings | None = None
) -> Feedback | None:
    """A feedback score as +1 / 0 / -1 (None when it cannot be read). With ``mapping`` (what
    the sources pass: ``settings.feedback``), NUMERIC by its thresholds and CATEGORICAL by its
    table; without, NUMERIC by sign and CATEGORICAL ignored."""
    value, kind = score.get("value"), score.get("dataType")
    if kind == "BOOLEAN" or isinstance(value, bool):
        return 1 if value else -1
    if kind == "CATEGORICAL" or isinstance(value, str):
        label = score.get("stringValue") if not isinstance(value, str) else value
        if mapping is None or not isinstance(label, str):
            return None
        table = {k.strip().lower(): v for k, v in mapping.categories.items()}
        return table.get(label.strip().lower())
    if kind in ("NUMERIC", None) and isinstance(value, int | float):
        if mapping is None:
            return 1 if value > 0 else -1 if value < 0 else 0
        return 1 if value >= mapping.up_at else -1 if value <= mapping.down_at else 0
    return None


def parse_time(value: Any) -> datetime:
    """A Langfuse timestamp (ISO string or datetime) in UTC; naive ones are taken as UTC."""
    at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def time_key(value: Any) -> str:
    """A comparable UTC ISO string of a Langfuse timestamp (orders scores by time)."""
    return parse_time(value).isoformat()


def iso_utc(at: datetime) -> str:
    """``at`` in the form the v1 API's time filters take (``...Z``)."""
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")
