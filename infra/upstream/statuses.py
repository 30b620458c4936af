"""What an upstream's HTTP error status means to its caller: a failure a retry may cure
(:class:`UpstreamUnavailable`), a refusal of the request itself (:class:`UpstreamRefused`,
carrying the model server's own message, fit to pass on to the client), or any other failure
(a plain :class:`~infra.errors.UpstreamError`).

Whose fault a refusal is (the client's request, or the version that refused it) is not
decided here: the gateway decides it by asking the stable version too
(:func:`infra.gateway.calls.call_routed`).
"""

from __future__ import annotations

import orjson

from infra.errors import TransientError, UpstreamError
from infra.retries import retry_after_seconds

# what a request's own content can cause: malformed (400), too large (413), unprocessable
# (422). 401/403 (the gateway's credentials), 404 (vLLM: the model or adapter is not loaded)
# and 429 (capacity) are about the server, never about the request.
REFUSAL_STATUSES = frozenset({400, 413, 422})
MAX_MESSAGE_CHARS = 1000
MAX_ERROR_BODY = 64 * 1024  # of an error answer, read for its message


class UpstreamUnavailable(UpstreamError, TransientError):
    """An upstream call that a later retry may cure: unreachable, timed out, 408, 429 or 5xx
    (``retry_after_s`` when the server sent ``Retry-After``). Any other 4xx is not retried:
    the request itself is wrong (:class:`UpstreamRefused`) or the server will not serve it."""


class UpstreamRefused(UpstreamError):
    """The upstream refused the request itself (HTTP 400, 413 or 422). ``status`` is its
    status; ``message`` its own error message, without the upstream's address or key (so a
    client may read it). ``str()`` names the version, for the operator's log."""

    def __init__(self, text: str, *, status: int, message: str) -> None:
        super().__init__(text)
        self.status = status
        self.message = message


def status_error(
    version: str,
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    *,
    hide: tuple[str, ...] = (),
) -> UpstreamError:
    """The error for an HTTP ``status`` of 400 or more from ``version``'s upstream; ``body``
    is the answer's body (a refusal's message is read from it, every string of ``hide`` cut
    out of it: the upstream's address and key)."""
    text = f"{version}: HTTP {status}"
    if status in REFUSAL_STATUSES:
        return UpstreamRefused(text, status=status, message=refusal_message(body, status, hide))
    if status not in (408, 429) and status < 500:
        return UpstreamError(text)
    error = UpstreamUnavailable(text)
    error.retry_after_s = retry_after_seconds(
        next((v for k, v in headers if k == b"retry-after"), None)
    )
    return error


def refusal_message(body: bytes, status: int, hide: tuple[str, ...] = ()) -> str:
    """The message of an error body as OpenAI-compatible servers write it (``{"error":
    {"message"}}``, vLLM's older ``{"message"}``, FastAPI's ``{"detail"}``), on one line, cut to
    ``MAX_MESSAGE_CHARS``, with every non-empty string of ``hide`` replaced; a generic one when
    the body has none."""
    found = _message(body[:MAX_ERROR_BODY])
    if not found:
        return f"the model server refused the request (HTTP {status})"
    for secret in sorted((h for h in hide if h), key=len, reverse=True):
        found = found.replace(secret, "[upstream]")
    found = " ".join(found.split())  # no line breaks or control whitespace
    return found[:MAX_MESSAGE_CHARS]


def _message(body: bytes) -> str:
    try:
        data = orjson.loads(body)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    error = data.get("error")
    if isinstance(error, dict):
        error = error.get("message")
    for value in (error, data.get("message"), data.get("detail")):
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value:  # FastAPI's validation errors
            return orjson.dumps(value).decode()
    return ""
