"""OpenTelemetry GenAI semantic-convention attributes (``gen_ai.*``) on a Langfuse observation.

Langfuse v3 ingests OTLP spans; the attributes it does not map onto observation fields stay in
the observation's ``metadata`` (under ``attributes``, or flat). An instrumentation that writes
the conversation only as ``gen_ai.prompt.N.role`` / ``gen_ai.prompt.N.content`` (and the answer
as ``gen_ai.completion.N.*``) therefore arrives with an empty input; these helpers rebuild the
OpenAI messages, the answer, the model and the token usage from the attributes.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, cast

from infra.traces.conversation import Message, Messages

if TYPE_CHECKING:
    from infra.traces.observation import Observation

_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(.+)$")


def attributes(metadata: Any) -> dict[str, Any]:
    """The ``gen_ai.*`` attributes of an observation's (decoded) metadata."""
    if not isinstance(metadata, dict):
        return {}
    found = {k: v for k, v in metadata.items() if str(k).startswith("gen_ai.")}
    nested = metadata.get("attributes")
    if isinstance(nested, str):
        try:
            nested = json.loads(nested)
        except ValueError:
            nested = None
    if isinstance(nested, dict):
        found.update({k: v for k, v in nested.items() if str(k).startswith("gen_ai.")})
    return found


def _indexed(attrs: dict[str, Any], kind: str) -> Messages:
    turns: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        match = _INDEXED.match(key)
        if match and match.group(1) == kind:
            turn = turns.setdefault(int(match.group(2)), {})
            name = match.group(3)
            if name.startswith("tool_calls."):  # gen_ai.completion.0.tool_calls.0.name ...
                _, idx, field = name.split(".", 2)
                calls = turn.setdefault("_calls", {})
                calls.setdefault(int(idx), {})[field] = value
            else:
                turn[name] = value
    out: Messages = []
    for _i, turn in sorted(turns.items()):
        calls = turn.pop("_calls", {})
        if calls:
            turn["tool_calls"] = [
                {
                    "id": c.get("id"),
                    "type": "function",
                    "function": {"name": c.get("name"), "arguments": c.get("arguments")},
                }
                for _j, c in sorted(calls.items())
            ]
        if "role" in turn:  # the attributes' values as the span carries them
            out.append(cast("Message", turn))
    return out


def prompt_messages(attrs: dict[str, Any]) -> Messages:
    """``gen_ai.prompt.N.*`` as OpenAI chat messages (empty when there are none)."""
    return _indexed(attrs, "prompt")


def completion_message(attrs: dict[str, Any]) -> Message | None:
    """``gen_ai.completion.0.*`` as an assistant message, or None."""
    turns = _indexed(attrs, "completion")
    return turns[0] if turns else None


def usage(attrs: dict[str, Any]) -> dict[str, Any]:
    """Token counts of ``gen_ai.usage.*`` (both the current and the older attribute names)."""
    tin = attrs.get("gen_ai.usage.input_tokens", attrs.get("gen_ai.usage.prompt_tokens"))
    tout = attrs.get("gen_ai.usage.output_tokens", attrs.get("gen_ai.usage.completion_tokens"))
    return {k: int(v) for k, v in (("input", tin), ("output", tout)) if v is not None}


def model(attrs: dict[str, Any]) -> str | None:
    """``gen_ai.request.model`` (else ``gen_ai.response.model``)."""
    value = attrs.get("gen_ai.request.model") or attrs.get("gen_ai.response.model")
    return str(value) if value else None


def is_generation(observation: Observation) -> bool:
    """A GENERATION, or a span carrying a GenAI prompt (an OTel LLM span Langfuse kept as a
    SPAN)."""
    if observation.get("type") == "GENERATION":
        return True
    meta = observation.get("metadata")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return False
    return bool(prompt_messages(attributes(meta)))
