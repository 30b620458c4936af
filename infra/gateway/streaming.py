"""Streaming chat completions: OpenAI ``chat.completion.chunk`` SSE events, ``data: [DONE]``."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.responses import Response, StreamingResponse

from infra.errors import UpstreamError
from infra.gateway.chat import (
    DONE_LINE,
    ChatRequest,
    chunk_line,
    response_headers,
    upstream_failed,
)
from infra.gateway.routing import Decision
from infra.gateway.upstreams import Completion

if TYPE_CHECKING:
    from infra.gateway.service import Gateway

log = logging.getLogger(__name__)


async def stream_chat(
    gw: Gateway, req: ChatRequest, decision: Decision, started: float, pairing_id: str | None
) -> Response:
    """Stream the answer as SSE chunks. The first piece is awaited before the response starts,
    so an upstream that fails at once still gets a proper status (or, on the canary, the stable
    version's answer)."""
    version, route = decision.version, decision.route
    t0 = started
    while True:
        pieces = gw.pool.get(version).stream(req.messages, req.params)
        try:
            first = await anext(pieces)
            break
        except StopAsyncIteration:
            first = Completion(text="", finish_reason="stop")
            break
        except UpstreamError as exc:
            gw.metrics.observe(
                model=version, route=route, seconds=time.perf_counter() - t0, error=True
            )
            if route != "canary":
                log.warning("upstream %s failed: %s", version, exc)
                return upstream_failed(exc)
            version, route, pairing_id = gw.watcher.state.stable, "stable", None
            t0 = time.perf_counter()
    trace_id = uuid.uuid4().hex
    body = _relay(
        gw,
        req,
        first,
        pieces,
        trace_id=trace_id,
        version=version,
        route=route,
        started=t0,
        pairing_id=pairing_id,
    )
    return StreamingResponse(
        body, media_type="text/event-stream", headers=response_headers(trace_id, version, route)
    )


async def _relay(
    gw: Gateway,
    req: ChatRequest,
    first: Completion,
    pieces: AsyncIterator[Completion],
    *,
    trace_id: str,
    version: str,
    route: str,
    started: float,
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
                yield chunk_line(trace_id=trace_id, version=version, delta={"content": piece.text})
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
        gw.metrics.observe(
            model=version, route=route, seconds=time.perf_counter() - started, error=failed
        )
        gw.trace(
            req,
            trace_id=trace_id,
            version=version,
            route=route,
            params=req.params,
            started=started,
            done=total if ok else None,
            prompt_group=uuid.uuid4().hex,
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
