"""Streaming chat completions: OpenAI ``chat.completion.chunk`` SSE events, ``data: [DONE]``."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.responses import Response, StreamingResponse

from infra.errors import UpstreamError
from infra.gateway.calls import CallRecorder, call_routed
from infra.gateway.chat import (
    DONE_LINE,
    ChatRequest,
    chunk_line,
    logprobs_body,
    response_headers,
    upstream_failed,
    wants_logprobs,
)
from infra.gateway.upstreams import Completion, GenParams

if TYPE_CHECKING:
    from infra.gateway.routing import Decision
    from infra.gateway.upstreams import UpstreamPool

log = logging.getLogger(__name__)

Pieces = AsyncIterator[Completion]


async def stream_chat(
    req: ChatRequest,
    *,
    pool: UpstreamPool,
    recorder: CallRecorder,
    decision: Decision,
    params: GenParams,
    started: float,
    prompt_group: str,
    pairing_id: str | None,
) -> Response:
    """Stream the answer as SSE chunks. The first piece is awaited before the response starts,
    so an upstream that fails at once still gets a proper status (or, on the canary, the stable
    version's answer)."""

    async def first_piece(version: str) -> tuple[Completion, Pieces]:
        pieces = pool.get(version).stream(req.messages, params)
        try:
            return await anext(pieces), pieces
        except StopAsyncIteration:
            return Completion(text="", finish_reason="stop"), pieces

    try:
        served = await call_routed(
            first_piece,
            recorder=recorder,
            req=req,
            decision=decision,
            params=params,
            started=started,
            prompt_group=prompt_group,
            pairing_id=pairing_id,
        )
    except UpstreamError as exc:
        return upstream_failed(exc)
    first, pieces = served.value
    trace_id = recorder.new_trace_id()
    body = _relay(
        req,
        first=first,
        pieces=pieces,
        recorder=recorder,
        trace_id=trace_id,
        version=served.version,
        route=served.route,
        params=params,
        started=served.started,
        prompt_group=prompt_group,
        pairing_id=served.pairing_id,
    )
    headers = response_headers(trace_id, served.version, served.route)
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


async def _relay(
    req: ChatRequest,
    *,
    first: Completion,
    pieces: Pieces,
    recorder: CallRecorder,
    trace_id: str,
    version: str,
    route: str,
    params: GenParams,
    started: float,
    prompt_group: str,
    pairing_id: str | None,
) -> AsyncIterator[bytes]:
    total = Completion(text="", finish_reason=None, logprobs=None)
    texts: list[str] = []
    ok = failed = False
    try:
        yield chunk_line(trace_id=trace_id, version=version, delta={"role": "assistant"})
        piece: Completion | None = first
        while piece is not None:
            _accumulate(total, piece)
            if piece.text:
                texts.append(piece.text)
                yield chunk_line(
                    trace_id=trace_id,
                    version=version,
                    delta={"content": piece.text},
                    logprobs=logprobs_body(piece) if wants_logprobs(req) else None,
                )
            piece = await anext(pieces, None)
        total.text = "".join(texts)
        yield chunk_line(
            trace_id=trace_id, version=version, finish_reason=total.finish_reason or "stop"
        )
        if req.include_usage:
            yield chunk_line(trace_id=trace_id, version=version, usage=total)
        yield DONE_LINE
        ok = True
    except UpstreamError as exc:
        failed = True
        log.warning("upstream %s failed mid-stream: %s", version, exc)
        err = {"error": {"message": f"upstream {version} failed", "type": "upstream_error"}}
        yield b"data: " + json.dumps(err).encode() + b"\n\n"
    finally:
        aclose = getattr(pieces, "aclose", None)
        if aclose is not None:
            await aclose()
        total.text = "".join(texts)
        recorder.observe(version=version, route=route, started=started, error=failed)
        recorder.trace(
            req,
            trace_id=trace_id,
            version=version,
            route=route,
            params=params,
            started=started,
            done=total if ok else None,
            prompt_group=prompt_group,
            pairing_id=pairing_id,
        )


def _accumulate(total: Completion, piece: Completion) -> None:
    if piece.finish_reason:
        total.finish_reason = piece.finish_reason
    if piece.tokens_in is not None:
        total.tokens_in = piece.tokens_in
    if piece.tokens_out is not None:
        total.tokens_out = piece.tokens_out
    if piece.logprobs:
        total.logprobs = (total.logprobs or []) + piece.logprobs
    if piece.tool_calls:
        total.tool_calls.extend(piece.tool_calls)
