"""OpenAI chat-completions shapes: parsing a request, building responses, stream chunks, errors."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.responses import Response

from infra.gateway.routing import ROUTED_MODEL
from infra.local_lm import message_text
from infra.upstream.upstreams import Completion, GenParams

# handled by the gateway itself, never forwarded upstream (``user`` is personal data)
_OWN_FIELDS = {
    "model",
    "messages",
    "stream",
    "stream_options",
    "user",
    "contexts",
    "session_id",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "seed",
    "n",
}


class BadRequest(ValueError):
    """The request does not follow the chat-completions shape."""


@dataclass
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    stream: bool
    params: GenParams
    user_id: str | None = None
    session_id: str | None = None
    workload: str | None = None  # X-Flywheel-Workload header, else metadata.workload
    question: str = ""
    contexts: list[str] = field(default_factory=list)
    include_usage: bool = False


def _number(body: Mapping[str, Any], key: str, kind: type) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"'{key}' must be a number")
    return kind(value)


def parse_chat_request(
    body: Any,
    *,
    session_header: str | None,
    default_max_tokens: int,
    workload_header: str | None = None,
) -> ChatRequest:
    """Validate the parts the gateway uses; everything else passes through to HTTP upstreams."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise BadRequest("every message needs a 'role'")
    model = body.get("model") or ROUTED_MODEL
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string")
    max_tokens = _number(body, "max_completion_tokens", int) or _number(body, "max_tokens", int)
    if max_tokens is not None and max_tokens < 1:
        raise BadRequest("'max_tokens' must be at least 1")
    params = GenParams(
        max_tokens=max_tokens or default_max_tokens,
        temperature=_number(body, "temperature", float),
        top_p=_number(body, "top_p", float),
        seed=_number(body, "seed", int),
        extra={k: v for k, v in body.items() if k not in _OWN_FIELDS},
    )
    users = [m for m in messages if m["role"] == "user"]
    extra_contexts = body.get("contexts")
    if extra_contexts is not None:
        if not isinstance(extra_contexts, list):
            raise BadRequest("'contexts' must be a list of strings")
        contexts = [str(c) for c in extra_contexts]
    else:
        contexts = [message_text(m) for m in messages if m["role"] in ("system", "tool")]
    user = body.get("user")
    session = session_header or body.get("session_id")
    stream_options = body.get("stream_options") or {}
    metadata = body.get("metadata")
    workload = workload_header or (metadata.get("workload") if isinstance(metadata, dict) else None)
    return ChatRequest(
        model=model,
        messages=messages,
        stream=bool(body.get("stream")),
        params=params,
        user_id=str(user) if user else None,
        session_id=str(session) if session else None,
        workload=str(workload)[:128] if workload else None,
        question=message_text(users[-1]) if users else "",
        contexts=contexts,
        include_usage=bool(
            isinstance(stream_options, dict) and stream_options.get("include_usage")
        ),
    )


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
    done: Completion, *, trace_id: str, version: str, logprobs: bool = False
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": done.text}
    if done.tool_calls:
        message["tool_calls"] = done.tool_calls
    return {
        "id": f"chatcmpl-{trace_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": version,
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
    version: str,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: Completion | None = None,
    logprobs: dict[str, Any] | None = None,
) -> bytes:
    """One SSE event in the ``chat.completion.chunk`` format."""
    data: dict[str, Any] = {
        "id": f"chatcmpl-{trace_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": version,
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
    if isinstance(headers, list):
        return headers
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


def json_response(
    data: Any, *, status: int = 200, headers: Mapping[str, str] | RawHeaders | None = None
) -> Response:
    return JsonResponse(data, status=status, headers=headers)


def error_response(status: int, message: str, *, kind: str, code: str | None = None) -> Response:
    """An error in the OpenAI shape, so clients raise their usual exceptions."""
    return json_response(
        {"error": {"message": message, "type": kind, "param": None, "code": code}}, status=status
    )


def upstream_failed(exc: Exception) -> Response:
    """502 naming the upstream and why (messages of UpstreamError carry no request content)."""
    return error_response(502, f"upstream failed: {exc}", kind="upstream_error")


def response_headers(trace_id: str, version: str, route: str) -> RawHeaders:
    """``X-Trace-Id`` (for feedback) and which version/route answered."""
    return [
        (b"x-trace-id", trace_id.encode("latin-1")),
        (b"x-flywheel-model", version.encode("latin-1")),
        (b"x-flywheel-route", route.encode("latin-1")),
    ]
