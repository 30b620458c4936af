"""OpenAI chat-completions shapes: responses, stream chunks, errors (the request:
:mod:`infra.gateway.chat_request`).

A public response never says which version or route served it: its ``model`` (in the body
and in every stream chunk) is the model the client asked for (``flywheel``, or the version
it named), and its headers are the same whichever version answered (``X-Trace-Id``, for
feedback). Only a request that carries the admin token (an operator, a test) also gets
``X-Flywheel-Model`` and ``X-Flywheel-Route``: a client that could tell the canary's answers
from stable's could vote, or fail, on the canary alone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from starlette.responses import Response

from infra.upstream.completion import Completion

if TYPE_CHECKING:
    from infra.gateway.chat_request import ChatRequest
    from infra.upstream.statuses import UpstreamRefused


def _usage(done: Completion) -> dict[str, int]:
    tin, tout = done.tokens_in or 0, done.tokens_out or 0
    return {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout}


def wants_logprobs(req: ChatRequest) -> bool:
    """Whether the client asked for token logprobs (``"logprobs": true``)."""
    return bool(req.params.extra.get("logprobs"))


def logprobs_body(done: Completion) -> dict[str, Any] | None:
    """The OpenAI ``logprobs`` object of an answer: the upstream's entries as it sent them, or
    (in-process models) one entry per generated token with its logprob."""
    if done.logprob_tokens:
        return {"content": done.logprob_tokens}
    if done.logprobs:
        return {
            "content": [
                {"token": "", "logprob": lp, "bytes": None, "top_logprobs": []}
                for lp in done.logprobs
            ]
        }
    return None


def completion_body(
    done: Completion, *, trace_id: str, model: str, logprobs: bool = False
) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` body of a finished completion, with its trace id as the
    id and ``model`` as the client asked for it."""
    message: dict[str, Any] = {"role": "assistant", "content": done.text}
    if done.tool_calls:
        message["tool_calls"] = done.tool_calls
    return {
        "id": f"chatcmpl-{trace_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": logprobs_body(done) if logprobs else None,
                "finish_reason": done.finish_reason or "stop",
            }
        ],
        "usage": _usage(done),
    }


def chunk_line(
    *,
    trace_id: str,
    model: str,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: Completion | None = None,
    logprobs: dict[str, Any] | None = None,
) -> bytes:
    """One SSE event in the ``chat.completion.chunk`` format (``model`` as the client asked)."""
    data: dict[str, Any] = {
        "id": f"chatcmpl-{trace_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": []
        if usage is not None
        else [
            {"index": 0, "delta": delta or {}, "logprobs": logprobs, "finish_reason": finish_reason}
        ],
    }
    if usage is not None:
        data["usage"] = _usage(usage)
    return b"data: " + orjson.dumps(data) + b"\n\n"


RawHeaders = list[tuple[bytes, bytes]]  # as the server sends them: lower-case, latin-1


class JsonResponse(Response):
    """A JSON response with its header list built directly (Starlette's ``init_headers`` cost
    more than encoding the body on the chat path)."""

    media_type = "application/json"

    def __init__(
        self,
        data: Any,
        *,
        status: int = 200,
        headers: Mapping[str, str] | RawHeaders | None = None,
    ) -> None:
        self.body = orjson.dumps(data)
        self.status_code = status
        self.background = None
        self.raw_headers = [
            (b"content-length", b"%d" % len(self.body)),
            (b"content-type", b"application/json"),
        ]
        if headers:
            self.raw_headers += raw_headers(headers)


def raw_headers(headers: Mapping[str, str] | RawHeaders) -> RawHeaders:
    """Headers as ASGI raw header pairs (lower-cased names, latin-1 bytes)."""
    if isinstance(headers, list):
        return headers
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


def json_response(
    data: Any, *, status: int = 200, headers: Mapping[str, str] | RawHeaders | None = None
) -> Response:
    """A JSON response with ``status`` and extra ``headers``."""
    return JsonResponse(data, status=status, headers=headers)


def error_response(status: int, message: str, *, kind: str, code: str | None = None) -> Response:
    """An error in the OpenAI shape, so clients raise their usual exceptions."""
    return json_response(
        {"error": {"message": message, "type": kind, "param": None, "code": code}}, status=status
    )


def upstream_failed(exc: Exception) -> Response:
    """502 naming the upstream and why (messages of UpstreamError carry no request content)."""
    return error_response(502, f"upstream failed: {exc}", kind="upstream_error")


def upstream_refused(exc: UpstreamRefused) -> Response:
    """The client's own request, refused by the model server: its status (400, 413 or 422)
    and message (without the server's address or key), in the OpenAI error shape."""
    return error_response(exc.status, exc.message, kind="invalid_request_error")


def response_headers(trace_id: str, *, served: tuple[str, str] | None = None) -> RawHeaders:
    """``X-Trace-Id`` (for feedback); with ``served`` (``(version, route)``, for a request
    that carries the admin token only) ``X-Flywheel-Model`` and ``X-Flywheel-Route`` too."""
    headers = [(b"x-trace-id", trace_id.encode("latin-1"))]
    if served is not None:
        headers.append((b"x-flywheel-model", served[0].encode("latin-1")))
        headers.append((b"x-flywheel-route", served[1].encode("latin-1")))
    return headers
