"""A chat-completions request as the gateway takes it: the fields it reads, the allow-list of
fields it forwards to HTTP upstreams (each within limits), and what it refuses with 400.

Only the OpenAI chat fields and vLLM's sampling extras reach an upstream; other fields are
dropped, and fields that override the server's prompt template (``chat_template``...) are
refused: the trace must record what the model was really sent. Every number must be finite and
within its range (``1e300`` is a 400, not a 500); ``max_tokens`` above the gateway's maximum is
clamped to it; a body nested deeper than ``MAX_DEPTH`` levels (measured on its bytes before
it is parsed, :mod:`infra.gateway.json_shape`) or with more than ``max_messages`` messages is
refused before any other work. A workload the request names (``X-Flywheel-Workload``, else
``metadata.workload``) is its workload only when configured (``FLYWHEEL_WORKLOADS``); any other
request is the shared release's, and never carries the client's string further.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infra.gateway.cohorts import ROUTED_MODEL
from infra.serving.local_lm import message_text
from infra.traces.conversation import DEFAULT_WORKLOAD, Messages
from infra.upstream.completion import GenParams

if TYPE_CHECKING:
    from infra.settings import Settings

MAX_DEPTH = 32  # JSON nesting; an OpenAI request with tools needs well under 10
MAX_ID_CHARS = 256  # ``user``, the session id
MAX_LIST = 128  # tools, stop strings

# fields forwarded to HTTP upstreams as they are, after their check
_NUMBERS: dict[str, tuple[type, float, float]] = {
    "presence_penalty": (float, -2.0, 2.0),
    "frequency_penalty": (float, -2.0, 2.0),
    "repetition_penalty": (float, 0.0, 10.0),
    "top_k": (int, -1, 1_000_000),
    "min_p": (float, 0.0, 1.0),
    "top_logprobs": (int, 0, 20),
}
_SHAPES: dict[str, tuple[type, ...]] = {
    "tools": (list,),
    "tool_choice": (str, dict),
    "parallel_tool_calls": (bool,),
    "response_format": (dict,),
    "stop": (str, list),
    "logit_bias": (dict,),
    "logprobs": (bool,),
    "functions": (list,),
    "function_call": (str, dict),
}
_FORWARDED = frozenset(_NUMBERS) | frozenset(_SHAPES)
# overrides of the server's prompt rendering or costly server-side extras: refused
REFUSED = frozenset(
    {
        "chat_template",
        "chat_template_kwargs",
        "add_generation_prompt",
        "continue_final_message",
        "add_special_tokens",
        "documents",
        "mm_processor_kwargs",
        "prompt_logprobs",
        "echo",
    }
)


class BadRequest(ValueError):
    """The request does not follow the chat-completions shape or the gateway's limits."""


TEXT_PARTS = frozenset({"text", "refusal"})
# content parts a multimodal model server reads; those with a URL make it fetch the URL
MEDIA_PARTS = {
    "image_url": "image_url",
    "video_url": "video_url",
    "audio_url": "audio_url",
    "input_audio": None,  # inline base64 only
    "file": None,
}


def check_parts(
    messages: Messages, *, allow_media: bool, url_prefixes: Collection[str] = ()
) -> None:
    """Refuse content parts other than text unless ``allow_media``; then any URL a part names
    must be an inline ``data:`` URL or start with one of ``url_prefixes`` (a model server
    fetches other URLs, from inside the network).

    Raises:
        BadRequest: a part of another type, or a URL that is not allowed.
    """
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in TEXT_PARTS:
                continue
            if kind not in MEDIA_PARTS:
                raise BadRequest(f"content parts of type {str(kind)[:40]!r} are not accepted")
            if not allow_media:
                raise BadRequest(
                    f"'{kind}' content parts are not accepted by this gateway "
                    "(FLYWHEEL_GATEWAY__ALLOW_MEDIA)"
                )
            assert isinstance(part, dict)
            field_name = MEDIA_PARTS[kind]
            file = part.get("file")
            if kind == "file" and isinstance(file, dict) and file.get("file_id") is not None:
                raise BadRequest("'file' parts must carry file_data, not a file_id")
            if field_name is None:
                continue
            holder = part.get(field_name)
            url = holder.get("url") if isinstance(holder, dict) else holder
            if not isinstance(url, str):
                raise BadRequest(f"'{kind}' parts need a URL")
            if not url.startswith("data:") and not any(url.startswith(p) for p in url_prefixes):
                raise BadRequest(
                    f"'{kind}' URLs must be inline data: URLs "
                    "(others only under FLYWHEEL_GATEWAY__MEDIA_URL_PREFIXES)"
                )


@dataclass
class ChatRequest:
    """What the gateway uses of one chat request (``params.extra``: what it forwards)."""

    model: str
    messages: Messages
    stream: bool
    params: GenParams
    user_id: str | None = None
    session_id: str | None = None
    workload: str | None = None  # X-Flywheel-Workload header, else metadata.workload
    # it named a workload that is not configured: served as the shared release (counted)
    unconfigured_workload: bool = False
    question: str = ""
    contexts: list[str] = field(default_factory=list)
    include_usage: bool = False
    # the client's address (the connection's peer, or the one a trusted proxy names:
    # infra.gateway.requester): the key of a request with neither a user nor a session
    client: str | None = None
    tenant: str | None = None  # a digest of the API key it showed (infra.gateway.requester)
    # the voices its client key may add to a step: (key id, cap); None: no cap
    quota: tuple[str, int] | None = None
    # who asked, as the voice series count users: computed once per request by the gateway
    # (``Calls.voter``); ``()``: not yet
    voice: int | None | tuple[()] = field(default=(), repr=False, compare=False)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` (parsed JSON) nests lists/objects deeper than ``limit`` levels."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def number(
    body: Mapping[str, Any], key: str, kind: type, lo: float, hi: float, *, clamp: bool = False
) -> Any:
    """``body[key]`` as ``kind`` (None when absent), finite and within ``[lo, hi]`` (above
    ``hi``: ``hi`` when ``clamp``).

    Raises:
        BadRequest: not a number, not finite, not a whole number for an ``int``, out of range.
    """
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRequest(f"'{key}' must be a finite number")
    if kind is int and (value != int(value) or abs(value) > 2**53):
        raise BadRequest(f"'{key}' must be a whole number")
    if value < lo or (value > hi and not clamp):
        raise BadRequest(f"'{key}' must be between {lo:g} and {hi:g}")
    return kind(min(value, hi))


def forwarded(body: Mapping[str, Any]) -> dict[str, Any]:
    """The allow-listed fields of ``body``, checked.

    Raises:
        BadRequest: a refused field, or an allowed one of the wrong shape or out of range.
    """
    refused = REFUSED.intersection(body)
    if refused:
        raise BadRequest(
            f"'{sorted(refused)[0]}' is not accepted: the gateway renders prompts "
            "with each model's own template"
        )
    extra: dict[str, Any] = {}
    if _FORWARDED.isdisjoint(body):
        return extra  # most requests: nothing beyond the fields the gateway reads itself
    for key, kinds in _SHAPES.items():
        if (value := body.get(key)) is not None:
            if not isinstance(value, kinds):
                raise BadRequest(f"'{key}' has the wrong type")
            extra[key] = value
    for key, (kind, lo, hi) in _NUMBERS.items():
        if (value := number(body, key, kind, lo, hi)) is not None:
            extra[key] = value
    _check_lists(extra)
    return extra


def _check_lists(extra: dict[str, Any]) -> None:
    for key in ("tools", "functions", "stop"):
        value = extra.get(key)
        if isinstance(value, list) and len(value) > MAX_LIST:
            raise BadRequest(f"'{key}' has more than {MAX_LIST} entries")
    bias = extra.get("logit_bias")
    if bias is not None:
        if len(bias) > 1024:
            raise BadRequest("'logit_bias' has more than 1024 entries")
        for value in bias.values():
            number({"logit_bias": value}, "logit_bias", float, -100.0, 100.0)


def _identifier(value: Any, name: str) -> str | None:
    if value is None or value == "":
        return None
    text = str(value)
    if len(text) > MAX_ID_CHARS:
        raise BadRequest(f"'{name}' is longer than {MAX_ID_CHARS} characters")
    return text


def _messages(body: Mapping[str, Any], max_messages: int) -> Messages:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    if len(messages) > max_messages:
        raise BadRequest(f"more than {max_messages} messages (FLYWHEEL_GATEWAY__MAX_MESSAGES)")
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise BadRequest("every message needs a 'role'")
    return messages


@dataclass(frozen=True, kw_only=True)
class ChatLimits:
    """What a chat request must keep within (the gateway's settings): ``max_tokens_limit``
    (a larger budget is clamped to it), ``max_messages``, the configured ``workloads`` a
    request may name, and whether content parts other than text are accepted
    (``allow_media``, their URLs under ``media_url_prefixes``: :func:`check_parts`)."""

    max_tokens_limit: int
    max_messages: int
    workloads: frozenset[str] = frozenset()
    allow_media: bool = False
    media_url_prefixes: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> ChatLimits:
        """The limits ``settings`` configure (``FLYWHEEL_GATEWAY__*``, ``FLYWHEEL_WORKLOADS``)."""
        gw = settings.gateway
        return cls(
            max_tokens_limit=gw.max_tokens_limit,
            max_messages=gw.max_messages,
            workloads=frozenset(settings.workloads),
            allow_media=gw.allow_media,
            media_url_prefixes=tuple(gw.media_url_prefixes),
        )


def parse_chat_request(
    body: Any,
    *,
    limits: ChatLimits,
    session_header: str | None,
    workload_header: str | None = None,
    shape_checked: bool = False,
) -> ChatRequest:
    """Validate the parts the gateway uses and the fields it forwards, within ``limits``; the
    workload named is the request's only when it is one of ``limits.workloads`` (else None:
    the shared release's). Content parts other than text are refused unless
    ``limits.allow_media`` (:func:`check_parts`). ``shape_checked``: the raw body's nesting
    was measured before it was parsed (:func:`infra.gateway.json_shape.shape_problem`, as
    the server's path does), so the parsed value is not walked again.

    Raises:
        BadRequest: the body breaks the shape or a limit (the message says which field).
    """
    max_tokens_limit, max_messages = limits.max_tokens_limit, limits.max_messages
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    messages = _messages(body, max_messages)  # the count first: it costs nothing to check
    if not shape_checked and too_deep(body):
        raise BadRequest(f"the body is nested deeper than {MAX_DEPTH} levels")
    check_parts(messages, allow_media=limits.allow_media, url_prefixes=limits.media_url_prefixes)
    model = body.get("model") or ROUTED_MODEL
    if not isinstance(model, str) or len(model) > MAX_ID_CHARS:
        raise BadRequest("'model' must be a model name")
    max_tokens = number(body, "max_completion_tokens", int, 1, max_tokens_limit, clamp=True)
    if max_tokens is None:
        max_tokens = number(body, "max_tokens", int, 1, max_tokens_limit, clamp=True)
    params = GenParams(
        max_tokens=max_tokens,
        temperature=number(body, "temperature", float, 0.0, 2.0),
        top_p=number(body, "top_p", float, 0.0, 1.0),
        seed=number(body, "seed", int, -(2**53), 2**53),
        extra=forwarded(body),
    )
    extra_contexts = body.get("contexts")
    if extra_contexts is not None:
        if not isinstance(extra_contexts, list) or len(extra_contexts) > max_messages:
            raise BadRequest("'contexts' must be a list of strings")
        contexts = [str(c) for c in extra_contexts]
    else:
        contexts = [message_text(m) for m in messages if m["role"] in ("system", "tool")]
    users = [m for m in messages if m["role"] == "user"]
    stream_options = body.get("stream_options") or {}
    metadata = body.get("metadata")
    named = workload_header or (metadata.get("workload") if isinstance(metadata, dict) else None)
    workload = named if isinstance(named, str) and named in limits.workloads else None
    return ChatRequest(
        model=model,
        messages=messages,
        stream=bool(body.get("stream")),
        params=params,
        user_id=_identifier(body.get("user"), "user"),
        session_id=_identifier(session_header or body.get("session_id"), "session id"),
        workload=workload,
        unconfigured_workload=workload is None and named not in (None, "", DEFAULT_WORKLOAD),
        question=message_text(users[-1]) if users else "",
        contexts=contexts,
        include_usage=bool(
            isinstance(stream_options, dict) and stream_options.get("include_usage")
        ),
    )
