"""The one base of flywheel's Langfuse clients (reader, eraser, annotation queue, writer).

:class:`LangfuseClient` is what all four share: built from ``settings.langfuse``
(:meth:`~LangfuseClient.from_settings`), closed by :meth:`~LangfuseClient.close` or at the end
of a ``with`` block. :class:`LangfuseHttp` adds what the three clients of the public HTTP API
share: one ``httpx`` client with the keys, page sizes clamped to what the server accepts, one
translation of HTTP answers into flywheel's errors (:func:`translate_status`) and one retry
policy (:func:`infra.retries.retry_call`; a server's ``Retry-After`` is honoured).

Rate limits: Langfuse Cloud limits the public API per minute and trace deletes per day
(``trace-delete``: 50 to 1000 requests a day by plan); a 429 carries ``Retry-After`` in whole
seconds. A wait of up to :data:`MAX_RETRY_AFTER_S` (two minutes: any per-minute window) is
waited out inside the call; a longer one (a daily budget) fails at once with the wait in the
message, so a run never hangs for hours: the eraser then defers the deletes it could not make.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

import httpx

from infra.errors import (
    FlywheelError,
    SourceError,
    SourceRateLimited,
    SourceUnavailable,
    TransientSourceError,
)
from infra.retries import Backoff, retry_after_seconds, retry_call

if TYPE_CHECKING:
    from infra.settings import LangfuseSettings

T = TypeVar("T")
Query = Mapping[str, str | int | float | bool | None]  # a request's query parameters

PAGE_MAX = 100
"""The largest ``limit`` Langfuse accepts on its page-numbered lists (v1 traces, v2 and v3
scores, annotation queues); above it the server answers 400."""
V2_OBSERVATIONS_MAX = 1000
"""The largest ``limit`` of ``GET /api/public/v2/observations``."""
MAX_RETRY_AFTER_S = 120.0
"""The longest ``Retry-After`` waited out inside a call (see the module docstring)."""

_UNAVAILABLE = (404, 405, 501)
_RETRIABLE_4XX = (408, 409, 425, 429)


def translate_status(
    status: int, headers: Mapping[str, str] | None, *, what: str, host: str
) -> FlywheelError | None:
    """Langfuse's HTTP answer ``status`` to ``what`` as a flywheel error (None for success):

    - 404/405/501: :class:`SourceUnavailable` (the endpoint is off or missing on this server,
      or the object is gone), never retried;
    - 401/403: :class:`SourceError` naming the key variables, never retried;
    - 408/409/425/429 and 5xx: :class:`TransientSourceError` (429:
      :class:`SourceRateLimited`) with ``retry_after_s`` from the server's ``Retry-After``;
    - any other 4xx: :class:`SourceError` (a request the server will never accept).
    """
    if status < 400:
        return None
    if status in _UNAVAILABLE:
        return SourceUnavailable(what, status)
    if status in (401, 403):
        return SourceError(
            f"Langfuse at {host} refused the API keys for {what} (HTTP {status}); check "
            "FLYWHEEL_LANGFUSE__PUBLIC_KEY/SECRET_KEY"
        )
    if status >= 500 or status in _RETRIABLE_4XX:
        after = retry_after_seconds((headers or {}).get("retry-after"))
        wait = f"; Retry-After {after:.0f} s" if after is not None else ""
        kind = SourceRateLimited if status == 429 else TransientSourceError
        err = kind(
            f"Langfuse at {host} answered HTTP {status} to {what}{wait} (check "
            "FLYWHEEL_LANGFUSE__HOST and the plan's rate limits)"
        )
        err.retry_after_s = after
        return err
    return SourceError(f"Langfuse at {host} rejected {what} (HTTP {status})")


class LangfuseClient:
    """What every Langfuse client shares: built from ``settings.langfuse`` as ``ROLE`` (the
    name a missing key is reported under), closed by :meth:`close` or a ``with`` block."""

    ROLE: ClassVar[str] = "langfuse client"

    @classmethod
    def from_settings(cls, settings: Any, **extra: Any) -> Self:
        """Build from ``settings``; ``extra`` keywords go to the constructor.

        Raises:
            ConfigError: a key is missing (the message names the role and the variables).
        """
        return cls(**cls.settings_keywords(settings), **extra)

    @classmethod
    def settings_keywords(cls, settings: Any) -> dict[str, Any]:
        """The constructor keywords taken from ``settings`` (overridden per client)."""
        return cls.connection(settings.langfuse, cls.ROLE)

    @staticmethod
    def connection(lf: LangfuseSettings, role: str) -> dict[str, Any]:
        """Host, keys, page size and timeout from ``settings.langfuse``.

        Raises:
            ConfigError: a key is missing (the message names ``role`` and the variables).
        """
        public_key, secret_key = lf.credentials(role)
        return {
            "host": lf.host,
            "public_key": public_key,
            "secret_key": secret_key,
            "page_size": lf.page_size,
            "timeout_s": lf.timeout_s,
        }

    def close(self) -> None:
        """Release the client's connections (and flush what it buffered)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LangfuseHttp(LangfuseClient):
    """A client of Langfuse's public HTTP API: Basic auth with the keys, one owned ``httpx``
    client, retries of transient failures per request (``retries`` after the first try,
    exponential backoff from ``backoff_s`` with jitter, ``Retry-After`` honoured up to
    :data:`MAX_RETRY_AFTER_S`)."""

    def __init__(
        self,
        *,
        host: str,
        public_key: str,
        secret_key: str,
        page_size: int = 100,
        retries: int = 4,
        timeout_s: float = 30.0,
        backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.host = host.rstrip("/")
        self.page_size = max(1, page_size)
        self.policy = Backoff(
            attempts=retries + 1, base_s=backoff_s, max_s=30.0, max_retry_after_s=MAX_RETRY_AFTER_S
        )
        self._sleep = sleep
        self._auth = httpx.BasicAuth(public_key, secret_key)
        self._http = httpx.Client(timeout=timeout_s, auth=self._auth, follow_redirects=True)

    @classmethod
    def settings_keywords(cls, settings: Any) -> dict[str, Any]:
        """Connection keywords plus ``retries`` (``FLYWHEEL_LANGFUSE__PAGE_RETRIES``)."""
        return {**super().settings_keywords(settings), "retries": settings.langfuse.page_retries}

    def limit(self, maximum: int = PAGE_MAX) -> int:
        """The configured page size, clamped to what the endpoint accepts."""
        return min(self.page_size, maximum)

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()

    def retrying(self, what: str, request: Callable[[], T], *, idempotent: bool = True) -> T:
        """``request()`` under the retry policy: every :class:`TransientSourceError` is retried
        for an idempotent request, only a 429 (:class:`SourceRateLimited`, nothing was done)
        for one that must not run twice."""
        retry_on = (TransientSourceError,) if idempotent else (SourceRateLimited,)
        return retry_call(
            request,
            operation=f"langfuse {what}",
            policy=self.policy,
            retry_on=retry_on,
            sleep=self._sleep,
        )

    def send(
        self,
        what: str,
        method: str,
        path: str,
        *,
        params: Query | None = None,
        json: Any = None,
        idempotent: bool = True,
    ) -> dict[str, Any]:
        """One request to ``path`` (relative to the host), retried (see :meth:`retrying`); the
        JSON object answered (``{}`` for an empty or non-object body).

        Raises:
            SourceUnavailable: HTTP 404/501.
            SourceError: bad keys or a request the server refuses.
            TransientSourceError: still failing after the retries, or a ``Retry-After``
                longer than :data:`MAX_RETRY_AFTER_S` (``retry_after_s`` says how long).
        """
        url = urllib.parse.urljoin(self.host + "/", path.lstrip("/"))
        request = lambda: self._once(what, method, url, params, json)  # noqa: E731
        return self.retrying(what, request, idempotent=idempotent)

    def _once(
        self, what: str, method: str, url: str, params: Query | None, body: Any
    ) -> dict[str, Any]:
        try:
            resp = self._http.request(method, url, params=params, json=body)
        except httpx.TransportError as exc:
            raise TransientSourceError(
                f"Langfuse at {self.host} ({what}): {type(exc).__name__}: cannot reach "
                f"{self.host}; check FLYWHEEL_LANGFUSE__HOST"
            ) from None
        error = translate_status(resp.status_code, resp.headers, what=what, host=self.host)
        if isinstance(error, SourceUnavailable):
            error.not_found = _says_not_found(resp)
        if error is not None:
            raise error
        try:
            answer = resp.json() if resp.content else {}
        except ValueError:
            answer = {}
        return answer if isinstance(answer, dict) else {}


def _says_not_found(resp: httpx.Response) -> bool:
    """Whether a 404 says the object is not there (Langfuse's JSON error
    ``LangfuseNotFoundError``), not that the endpoint is off (Langfuse v4's events_only answer
    has no ``error``) or missing (a page, not JSON)."""
    try:
        body = resp.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("error") == "LangfuseNotFoundError"
