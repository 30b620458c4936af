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
from typing import Any, TypedDict, TypeGuard

import orjson


class ToolCallDeltaFunction(TypedDict, total=False):
    """The function of a tool call as an upstream sends it: ``name`` once, ``arguments`` whole
    or in fragments (openai's ``ChoiceDeltaToolCallFunction``)."""

    name: str | None
    arguments: str | None


class ToolCallDelta(TypedDict, total=False):
    """A tool call as an upstream sends it: one entry of a stream chunk's ``delta.tool_calls``
    (openai's ``ChoiceDeltaToolCall``: ``index`` names the call, ``id``, ``type`` and
    ``function.name`` come once, ``function.arguments`` in fragments), or, without ``index``,
    a whole call of a finished answer (its ``id`` may still be None)."""

    index: int
    id: str | None
    type: str | None
    function: ToolCallDeltaFunction


class TopLogprob(TypedDict, total=False):
    """One of the likeliest tokens at a position (openai's ``TopLogprob``)."""

    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TypedDict, total=False):
    """One entry of a choice's ``logprobs.content`` (openai's ``ChatCompletionTokenLogprob``)."""

    token: str
    logprob: float
    bytes: list[int] | None
    top_logprobs: list[TopLogprob]


@dataclass
class GenParams:
    """Sampling parameters of one call; ``extra`` is passed through to HTTP upstreams.
    ``max_tokens`` None: the client named no budget (an HTTP upstream gets none either)."""

    max_tokens: int | None = None
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
    # OpenAI tool calls as the upstream sent them (stream deltas carry ``index``, id may be None)
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    logprob_tokens: list[TokenLogprob] | None = None  # the upstream's ``logprobs.content``
    # the model server's measured compute seconds for this answer (the in-process model's
    # share of its batch); None: the gateway counts the call's own seconds (infra.metrics.cost)
    compute_s: float | None = None
    # how many answers the model server generated together with this one (its batch), where it
    # says; per-request compute falls with the batch, so cost is compared at equal batch sizes
    batch_size: int | None = None


def logprob_values(tokens: list[Any] | None) -> list[float] | None:
    """The logprob of each entry that has one (None when there are none)."""
    if not tokens:
        return None
    return [float(t["logprob"]) for t in tokens if isinstance(t, dict) and "logprob" in t] or None


def choice_logprob_tokens(choice: dict[str, Any]) -> list[TokenLogprob] | None:
    """The OpenAI/vLLM ``logprobs.content`` entries of a choice (token, logprob, ...)."""
    content = (choice.get("logprobs") or {}).get("content")
    if not isinstance(content, list):
        return None
    return [t for t in content if _is_token_logprob(t)] or None


# The upstream's JSON is typed where it is read: an entry is taken for what OpenAI's API says it
# is once it is an object (and, for a logprob, has one); every other key is read with .get.
def _is_token_logprob(entry: object) -> TypeGuard[TokenLogprob]:
    return isinstance(entry, dict) and "logprob" in entry


def _is_tool_call(entry: object) -> TypeGuard[ToolCallDelta]:
    return isinstance(entry, dict)


async def read_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[Completion]:
    """The pieces of an SSE byte stream (``data: {...}`` lines, ``data: [DONE]`` ends it)."""
    rest = b""
    async for data in chunks:
        lines = (rest + data).split(b"\n")
        rest = lines.pop()  # an incomplete last line waits for the next read
        piece: Completion | None = None
        texts: list[str] = []
        done = False
        for raw in lines:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            try:
                event = orjson.loads(payload)
            except ValueError:
                continue
            if isinstance(event, dict):
                if piece is None:
                    piece = Completion(text="", finish_reason=None)
                fold_chunk(piece, event, texts)
        if piece is not None:
            piece.text = "".join(texts)
            piece.logprobs = logprob_values(piece.logprob_tokens)  # once per read, not per event
            yield piece
        if done:
            return


def fold_chunk(into: Completion, event: dict[str, Any], texts: list[str]) -> None:
    """One parsed ``chat.completion.chunk`` into ``into``: its content appended to ``texts``,
    its tool-call deltas, logprob entries, finish reason and token counts into ``into``."""
    choices = event.get("choices")
    if choices and isinstance(choices[0], dict):
        choice = choices[0]
        delta = choice.get("delta") or {}
        if content := delta.get("content"):
            texts.append(content)
        if calls := delta.get("tool_calls"):
            into.tool_calls.extend(c for c in calls if _is_tool_call(c))
        if isinstance(lp := choice.get("logprobs"), dict) and isinstance(
            tokens := lp.get("content"), list
        ):
            # the upstream's entries as it sent them; their values are read once per piece
            if into.logprob_tokens is None:
                into.logprob_tokens = list(tokens)
            else:
                into.logprob_tokens.extend(tokens)
        into.finish_reason = choice.get("finish_reason") or into.finish_reason
    if usage := event.get("usage"):
        if usage.get("prompt_tokens") is not None:
            into.tokens_in = usage["prompt_tokens"]
        if usage.get("completion_tokens") is not None:
            into.tokens_out = usage["completion_tokens"]


def merge_meta(into: Completion, piece: Completion) -> Completion:
    """Everything of ``piece`` but its text and tool calls into ``into``: the finish reason and
    token counts it names, its logprobs appended (in place; returns ``into``)."""
    into.finish_reason = piece.finish_reason or into.finish_reason
    if piece.tokens_in is not None:
        into.tokens_in = piece.tokens_in
    if piece.tokens_out is not None:
        into.tokens_out = piece.tokens_out
    if piece.compute_s is not None:
        into.compute_s = piece.compute_s
    if piece.batch_size is not None:
        into.batch_size = piece.batch_size
    if piece.logprobs:
        if into.logprobs is None:
            into.logprobs = list(piece.logprobs)
        else:
            into.logprobs.extend(piece.logprobs)
    if piece.logprob_tokens:
        if into.logprob_tokens is None:
            into.logprob_tokens = list(piece.logprob_tokens)
        else:
            into.logprob_tokens.extend(piece.logprob_tokens)
    return into
