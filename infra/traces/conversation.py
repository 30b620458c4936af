"""The conversation a trace keeps: OpenAI chat messages exactly as the model was sent them
(system, user, assistant with ``tool_calls``, tool results), and the views derived from them:
``question`` (the last user turn) and ``contexts`` (retrieval and tool results).

Old records carry only ``question``/``contexts``/``answer``; :func:`legacy_messages` builds the
messages they stand for (contexts as tool results before the user question), so every record
has a conversation whatever its age.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, Required, TypedDict

JsonObject = dict[str, Any]  # arbitrary JSON: a tool call's arguments, a JSON schema, a raw body


class ContentPart(TypedDict, total=False):
    """One part of a message's ``content`` list (OpenAI: ``text``, ``refusal``, media parts
    whose payload sits under the key their ``type`` names)."""

    type: Required[str]
    text: str
    refusal: str
    image_url: JsonObject
    video_url: JsonObject
    audio_url: JsonObject
    input_audio: JsonObject
    file: JsonObject


class ToolCallFunction(TypedDict, total=False):
    """The function a tool call names, its ``arguments`` a JSON string."""

    name: str
    arguments: str


class ToolCall(TypedDict, total=False):
    """One entry of an assistant message's ``tool_calls`` (OpenAI chat format)."""

    id: str
    type: str
    function: ToolCallFunction


class Message(TypedDict, total=False):
    """One OpenAI chat message of a conversation: system, user, assistant (maybe with
    ``tool_calls``) or a tool result (``tool_call_id``). A TypedDict: a plain dict at runtime,
    so records and rows keep exactly the JSON they had."""

    role: Required[str]
    content: str | list[ContentPart] | None
    name: str
    tool_calls: list[ToolCall]
    tool_call_id: str


Messages = list[Message]  # a conversation, in order

DEFAULT_WORKLOAD = "default"
WORKLOAD_HEADER = "X-Flywheel-Workload"  # the request header naming a workload: its one spelling
# what the answer should rest on: tool and retrieval results, and the system prompt (where RAG
# agents put retrieved documents); the gateway and the Langfuse reader derive the same list
CONTEXT_ROLES = ("system", "tool", "function")


def content_text(content: Any) -> str:
    """The text of a message's ``content`` (a string, OpenAI text parts, or None)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(p for p in parts if isinstance(p, str))
    return "" if content is None else json.dumps(content, sort_keys=True)


def last_user_text(messages: Messages) -> str:
    """The last user turn (the derived ``question``); empty without one."""
    users = [m for m in messages if m.get("role") == "user"]
    return content_text(users[-1].get("content")) if users else ""


def context_texts(messages: Messages) -> list[str]:
    """System prompts, tool and retrieval results in order (the derived ``contexts``)."""
    return [content_text(m.get("content")) for m in messages if m.get("role") in CONTEXT_ROLES]


def legacy_messages(question: str, contexts: list[str]) -> Messages:
    """The conversation an old (question, contexts) record stands for."""
    messages: Messages = [
        {"role": "tool", "tool_call_id": f"context_{i}", "content": c}
        for i, c in enumerate(contexts)
    ]
    return [*messages, {"role": "user", "content": question}]


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def conversation_key(
    messages: Messages, answer: str, *, fold: Callable[[str], str] | None = None
) -> str:
    """A hash of the conversation and its answer with each text folded (default: case and
    spacing) and tool call ids left out (a client numbers its calls per request): the dedup
    key of curate, within a window and across windows."""
    _norm = fold or _fold
    turns = []
    for m in messages:
        calls = [
            [(c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments")]
            for c in m.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        turns.append([m.get("role"), _norm(content_text(m.get("content"))), calls])
    data = json.dumps([turns, _norm(answer)], sort_keys=True, default=str)
    return hashlib.sha256(data.encode()).hexdigest()
