"""Who a public caller is: the client keys (:mod:`infra.client_keys`) as the gateway checks
them on every request to ``/v1/*``.

- **Open mode**: no key was ever created and ``FLYWHEEL_GATEWAY__REQUIRE_KEYS`` is off (the
  embedded demo). Every caller is served; the gateway says so in its startup line.
- **Keyed mode**: otherwise. A request without ``Authorization: Bearer <key>``, or with a key
  that is unknown or revoked, gets 401 with the OpenAI-shaped error body (``invalid_api_key``)
  and nothing else: the key is never echoed, logged or traced (only its digest is compared).
  A key that names workloads may call only those (403 for another; a request naming none
  runs as the key's first); a key over its rate limit gets 429 (``Retry-After``).

The key file is re-read from the store as often as the routing state, so a key created or
revoked by the CLI reaches every gateway within a poll (a read that fails keeps the last one).

A key is also a limit on voices: while more than one key is active, each key adds to each
version of a release step at most as many users who met an error, and as many votes, as the
other keys' users that version served, or ``max_voices`` (default
``FLYWHEEL_GATEWAY__KEY_VOICES_PER_STEP``) where that is more (:mod:`infra.gateway.voices`),
so no single key, one application with many users or one abuser, outvotes the rest. Users
served are never capped. A single active key is the only client and is not capped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.client_keys import ClientKey, ClientKeys, digest, read_keys
from infra.gateway.aio import run_in_daemon_thread

if TYPE_CHECKING:
    from starlette.responses import Response

    from infra.settings import GatewaySettings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

Quota = tuple[str, int]  # (key id, voices it may add per version and step)

OPEN_MODE_LINE = (
    "open mode: no client API keys configured, any caller may use the public API "
    "(create one with `flywheel keys create NAME`)"
)


@dataclass(frozen=True)
class Caller:
    """A caller let through: its key (None in open mode) and its voice quota."""

    key: ClientKey | None = None
    quota: Quota | None = None


@dataclass(frozen=True)
class Refusal:
    """Why a caller is not served: HTTP status, message, OpenAI error type and code."""

    status: int
    message: str
    kind: str
    code: str
    retry_after_s: int | None = None


UNAUTHORIZED = Refusal(
    401,
    "Incorrect or missing API key: send a client key as 'Authorization: Bearer <key>' "
    "(keys are managed with `flywheel keys`)",
    "invalid_request_error",
    "invalid_api_key",
)


class _Bucket:
    """A token bucket: ``rate_per_min`` requests a minute, bursts up to that many."""

    __slots__ = ("at", "capacity", "tokens")

    def __init__(self, capacity: int, now: float) -> None:
        self.capacity = float(capacity)
        self.tokens = float(capacity)
        self.at = now

    def take(self, now: float) -> float:
        """0 when a request may go now (one token taken), else seconds until one may."""
        rate = self.capacity / 60.0
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / rate


class KeyRing:
    """The client keys one gateway process checks callers against (module docstring)."""

    def __init__(
        self,
        store: ObjectStore,
        cfg: GatewaySettings,
        *,
        clock: object = time.monotonic,
    ) -> None:
        self.store = store
        self.require = cfg.require_keys
        self.default_voices = cfg.key_voices_per_step
        self._clock = clock
        self._by_digest: dict[str, ClientKey] = {}
        self._keyed = cfg.require_keys
        self._active = 0
        self._buckets: dict[str, _Bucket] = {}
        self.loaded = False

    @property
    def keyed(self) -> bool:
        """Whether callers must show a key (False: open mode)."""
        return self._keyed

    def load(self, keys: ClientKeys) -> None:
        """Check callers against ``keys`` from now on."""
        was = self._keyed
        self._by_digest = {k.digest: k for k in keys.keys if k.active}
        self._active = len(self._by_digest)
        self._keyed = self.require or bool(keys.keys)
        if self.loaded and was != self._keyed:
            log.warning("client keys: %s", "keyed mode" if self._keyed else OPEN_MODE_LINE)
        self.loaded = True

    def refresh(self) -> None:
        """Re-read the key file (a failed read keeps the keys in use, and says so)."""
        try:
            keys = read_keys(self.store)
        except Exception as exc:  # the store is down or the file is damaged
            log.warning("client keys not re-read (%s): the last ones stay", type(exc).__name__)
            return
        self.load(keys)

    async def run(self, interval_s: float) -> None:
        """Re-read the key file every ``interval_s`` seconds, forever."""
        while True:
            await asyncio.sleep(interval_s)
            await run_in_daemon_thread(self.refresh)

    def mode_line(self) -> str:
        """The startup line's words on client authentication."""
        if not self._keyed:
            return OPEN_MODE_LINE
        return f"keyed mode: {self._active} active client API key(s)"

    def check(self, authorization: str | None) -> Caller | Refusal:
        """The caller showing ``authorization`` (a header's value), or why it is refused (its
        workload is :func:`workload_refusal`'s to check, once the body is read)."""
        if not self._keyed:
            return Caller()
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return UNAUTHORIZED
        key = self._by_digest.get(digest(token))
        if key is None:
            return UNAUTHORIZED
        if key.rate_per_min is not None:
            now = float(self._clock())  # type: ignore[operator]
            bucket = self._buckets.get(key.id)
            if bucket is None or bucket.capacity != key.rate_per_min:
                bucket = self._buckets[key.id] = _Bucket(key.rate_per_min, now)
            wait = bucket.take(now)
            if wait > 0:
                return Refusal(
                    429,
                    f"rate limit of this API key reached ({key.rate_per_min} requests a minute)",
                    "rate_limit_error",
                    "rate_limit_exceeded",
                    retry_after_s=max(1, int(wait + 0.999)),
                )
        return Caller(key=key, quota=self.quota(key))

    def quota(self, key: ClientKey) -> Quota | None:
        """How many voices ``key`` may add per version and step (None: no cap: it is the only
        active key, or its cap is 0)."""
        if self._active <= 1:
            return None
        cap = self.default_voices if key.max_voices is None else key.max_voices
        return (key.id, cap) if cap > 0 else None


def workload_refusal(caller: Caller, workload: str | None, *, named: bool) -> Refusal | None:
    """Why ``caller`` may not run a request of ``workload`` (None: the shared release's;
    ``named``: the request named a workload, configured or not), or None."""
    allowed = caller.key.workloads if caller.key is not None else []
    if not allowed or (workload in allowed):
        return None
    if workload is None and not named:
        return None  # the caller's own workload is put on it (ChatEndpoint)
    return Refusal(
        403,
        f"this API key may not call workload {workload or 'default'!r}",
        "permission_error",
        "workload_not_allowed",
    )


def refusal_response(refusal: Refusal) -> Response:
    """The refusal in the OpenAI error shape (401 with ``WWW-Authenticate``, 429 with
    ``Retry-After``)."""
    from infra.gateway.chat import error_response

    response = error_response(refusal.status, refusal.message, kind=refusal.kind, code=refusal.code)
    if refusal.status == 401:
        response.headers["www-authenticate"] = "Bearer"
    if refusal.retry_after_s is not None:
        response.headers["retry-after"] = str(refusal.retry_after_s)
    return response
