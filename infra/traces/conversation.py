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
from typing import Any

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


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """The last user turn (the derived ``question``); empty without one."""
    users = [m for m in messages if m.get("role") == "user"]
    return content_text(users[-1].get("content")) if users else ""


def context_texts(messages: list[dict[str, Any]]) -> list[str]:
    """System prompts, tool and retrieval results in order (the derived ``contexts``)."""
    return [content_text(m.get("content")) for m in messages if m.get("role") in CONTEXT_ROLES]


def legacy_messages(question: str, contexts: list[str]) -> list[dict[str, Any]]:
    """The conversation an old (question, contexts) record stands for."""
    messages: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": f"context_{i}", "content": c}
        for i, c in enumerate(contexts)
    ]
    return [*messages, {"role": "user", "content": question}]


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def conversation_key(
    messages: list[dict[str, Any]], answer: str, *, fold: Callable[[str], str] | None = None
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
