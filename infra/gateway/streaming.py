"""Streaming chat completions: OpenAI ``chat.completion.chunk`` SSE events, ``data: [DONE]``."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TYPE_CHECKING

from starlette.responses import Response

from infra.errors import UpstreamError
from infra.gateway.calls import Call, CallRecorder, call_routed
from infra.gateway.chat import (
    chunk_line,
    logprobs_body,
    response_headers,
    upstream_failed,
    upstream_refused,
    wants_logprobs,
)
from infra.gateway.sse import DONE_LINE, EventStream, assemble_tool_calls, tool_call_deltas
from infra.upstream.completion import merge_meta
from infra.upstream.statuses import UpstreamRefused
from infra.upstream.upstreams import Completion

if TYPE_CHECKING:
    from infra.upstream.upstreams import UpstreamPool

log = logging.getLogger(__name__)

Pieces = AsyncIterator[Completion]


async def stream_chat(
    call: Call,
    *,
    pool: UpstreamPool,
    recorder: CallRecorder,
    reveal: bool = False,
    on_end: Callable[[bool], object] | None = None,
) -> Response:
    """Stream the answer to ``call`` as SSE chunks. The first piece is awaited before the
    response starts, so an upstream that fails at once still gets a proper status (or, on the
    canary, the stable version's answer). ``reveal``: the response names the version and
    route that served it (a request with the admin token; see :mod:`infra.gateway.chat`).
    ``on_end``: called once the stream is over, with whether the client got the whole answer
    (False: the upstream failed mid-answer or the client hung up)."""
    messages, params = call.req.messages, call.params

    async def first_piece(version: str) -> tuple[Completion, Pieces]:
        pieces = pool.get(version).stream(messages, params)
        try:
            return await anext(pieces), pieces
        except StopAsyncIteration:
            return Completion(text="", finish_reason="stop"), pieces

    try:
        served = await call_routed(first_piece, recorder=recorder, call=call)
    except UpstreamRefused as exc:
        return upstream_refused(exc)
    except UpstreamError as exc:
        return upstream_failed(exc)
    first, pieces = served.value
    trace_id = recorder.new_trace_id()
    body = _relay(
        served.call,
        first=first,
        pieces=pieces,
        recorder=recorder,
        trace_id=trace_id,
        on_end=on_end,
    )
    shown = (served.call.version, served.call.route) if reveal else None
    return EventStream(
        body,
        headers=response_headers(trace_id, served=shown),
        stall_s=pool.settings.gateway.stall_timeout_s,
    )


async def _relay(
    call: Call,
    *,
    first: Completion,
    pieces: Pieces,
    recorder: CallRecorder,
    trace_id: str,
    on_end: Callable[[bool], object] | None = None,
) -> AsyncGenerator[bytes, None]:
    req = call.req
    total = Completion(text="", finish_reason=None, logprobs=None)
    texts: list[str] = []
    ok = failed = False
    logprobs = wants_logprobs(req)
    try:
        # the role goes out with the first piece, and the piece that finishes the answer with
        # the finish reason, the usage and [DONE] (one write each, not several: on loopback
        # the end of an answer mostly arrives in the same read as its last text)
        # chunks name the model the client asked for, never the version that serves it
        model = req.model
        out = chunk_line(trace_id=trace_id, model=model, delta={"role": "assistant"})
        piece: Completion | None = first
        while piece is not None:
            merge_meta(total, piece)  # text and tool calls are gathered below
            delta: dict[str, object] = {}
            if piece.text:
                texts.append(piece.text)
                delta["content"] = piece.text
            if piece.tool_calls:
                calls = tool_call_deltas(piece.tool_calls, first_index=len(total.tool_calls))
                assemble_tool_calls(total.tool_calls, calls)
                delta["tool_calls"] = calls
            if delta:
                out += chunk_line(
                    trace_id=trace_id,
                    model=model,
                    delta=delta,
                    logprobs=logprobs_body(piece) if logprobs else None,
                )
            if out and total.finish_reason is None:  # after the finish (a usage chunk): held
                yield out
                out = b""
            piece = await anext(pieces, None)
        total.text = "".join(texts)
        out += chunk_line(
            trace_id=trace_id, model=model, finish_reason=total.finish_reason or "stop"
        )
        if req.include_usage:
            out += chunk_line(trace_id=trace_id, model=model, usage=total)
        yield out + DONE_LINE
        ok = True
    except UpstreamError as exc:
        failed = True
        log.warning("upstream %s failed mid-stream: %s", call.version, exc)
        # the same words whichever version was answering
        err = {"error": {"message": "upstream failed mid-answer", "type": "upstream_error"}}
        yield b"data: " + json.dumps(err).encode() + b"\n\n"
    finally:
        aclose = getattr(pieces, "aclose", None)
        if aclose is not None:
            await aclose()
        total.text = "".join(texts)
        recorder.observe(call, error=failed, done=total if ok else None)
        recorder.trace(call, trace_id=trace_id, done=total if ok else None)
        if on_end is not None:
            on_end(ok)
