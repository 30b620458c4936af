"""What a model server answers, as the gateway handles it: sampling parameters, a completion
(or one piece of a stream), and the reading of an OpenAI ``chat.completion.chunk`` SSE stream.

Every event that arrived in one read of the socket becomes one piece (their deltas merged), so
the relay writes to the client once per read, not once per event: on loopback an upstream's
events mostly arrive together, and one write per event was the largest cost of a streamed
request. Nothing waits for more data, so the first token is never delayed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson

Messages = list[dict[str, Any]]


@dataclass
class GenParams:
    """Sampling parameters of one call; ``extra`` is passed through to HTTP upstreams."""

    max_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Completion:
    """A finished answer (or, in a stream, one delta with ``finish_reason`` on the last)."""

    text: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    logprobs: list[float] | None = None
    finish_reason: str | None = "stop"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    logprob_tokens: list[dict[str, Any]] | None = None  # the upstream's ``logprobs.content``


def logprob_values(tokens: list[dict[str, Any]] | None) -> list[float] | None:
    """The logprob of each entry of :func:`choice_logprob_tokens` (None when there are none)."""
    return [float(t["logprob"]) for t in tokens] if tokens else None


def choice_logprob_tokens(choice: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The OpenAI/vLLM ``logprobs.content`` entries of a choice (token, logprob, ...)."""
    content = (choice.get("logprobs") or {}).get("content")
    if not isinstance(content, list):
        return None
    return [t for t in content if isinstance(t, dict) and "logprob" in t] or None


async def read_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[Completion]:
    """The pieces of an SSE byte stream (``data: {...}`` lines, ``data: [DONE]`` ends it)."""
    rest = b""
    async for data in chunks:
        lines = (rest + data).split(b"\n")
        rest = lines.pop()  # an incomplete last line waits for the next read
        piece: Completion | None = None
        done = False
        for raw in lines:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            event = parse_chunk(payload)
            if event is not None:
                piece = event if piece is None else merge_piece(piece, event)
        if piece is not None:
            yield piece
        if done:
            return


def parse_chunk(payload: bytes | str) -> Completion | None:
    """One ``chat.completion.chunk`` as a piece; None when it is not JSON."""
    try:
        data = orjson.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    usage = data.get("usage") or {}
    choices = data.get("choices") or [{}]
    choice = choices[0] or {}
    delta = choice.get("delta") or {}
    tokens = choice_logprob_tokens(choice)
    return Completion(
        text=delta.get("content") or "",
        tokens_in=usage.get("prompt_tokens"),
        tokens_out=usage.get("completion_tokens"),
        logprobs=logprob_values(tokens),
        finish_reason=choice.get("finish_reason"),
        tool_calls=[c for c in delta.get("tool_calls") or [] if isinstance(c, dict)],
        logprob_tokens=tokens,
    )


def merge_piece(into: Completion, piece: Completion) -> Completion:
    """``piece`` appended to ``into`` (in place; returns ``into``)."""
    into.text += piece.text
    into.tool_calls.extend(piece.tool_calls)
    return merge_meta(into, piece)


def merge_meta(into: Completion, piece: Completion) -> Completion:
    """Everything of ``piece`` but its text and tool calls into ``into``: the finish reason and
    token counts it names, its logprobs appended (in place; returns ``into``)."""
    into.finish_reason = piece.finish_reason or into.finish_reason
    if piece.tokens_in is not None:
        into.tokens_in = piece.tokens_in
    if piece.tokens_out is not None:
        into.tokens_out = piece.tokens_out
    if piece.logprobs:
        into.logprobs = (into.logprobs or []) + piece.logprobs
    if piece.logprob_tokens:
        into.logprob_tokens = (into.logprob_tokens or []) + piece.logprob_tokens
    return into
