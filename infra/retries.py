"""The one retry policy of flywheel: retry only transient I/O
(:class:`~infra.errors.TransientError`, which every adapter raises for timeouts, throttling,
5xx and lost commit races), with exponential backoff and jitter; never a data or
configuration error, never a 4xx other than throttling.

Two ways in, one policy, and each failure retried at one level only:

- :func:`retry_call` / :func:`retry_async` around one I/O call inside an adapter. These are the
  only retry loops in flywheel's code: an adapter translates its client's errors into a
  :class:`TransientError` subclass (with ``retry_after_s`` when the server said how long to
  wait) and lets the helper decide whether and when to try again. Its budget is the outage it
  rides out (the store's: about 10 s). An error it gives up on is marked (:func:`gave_up`).
- ``@task(**IO_RETRIES)`` on every Prefect task that does I/O (Prefect re-runs the task;
  :mod:`infra.task_retries`, apart so that a process that only calls adapters, the gateway,
  does not import Prefect) retries a transient error no helper has retried: a marked one
  fails the task at once. Retries inside retries made one store call run up to 20 times (5
  attempts in the adapter, each of 4 task attempts) and re-ran every step of the task before it.
- Two libraries retry inside their own calls, and are then that level: pyarrow's S3 client for
  a request for the warehouse's files, pyiceberg for a commit that lost a race.
  :mod:`infra.catalog` marks what they gave up on and counts pyiceberg's redone commits.

Every retry is counted per operation in :data:`RETRIES` (``flywheel_retries_total{operation}``
on the stage and gateway metrics), so an operator sees a flaky dependency before it fails.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from infra.errors import TransientError

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """How often and how long to wait: ``attempts`` calls in all, the n-th retry after
    ``base_s * factor**(n-1)`` seconds (capped at ``max_s``), scaled by a random factor in
    ``[1 - jitter, 1 + jitter]``. A server's ``Retry-After`` (``retry_after_s`` on the error)
    replaces the computed delay when it is longer, up to ``max_retry_after_s``; a longer one
    fails at once (a daily quota is not waited out inside a call)."""

    attempts: int = 4
    base_s: float = 0.2
    factor: float = 2.0
    max_s: float = 10.0
    jitter: float = 0.5
    max_retry_after_s: float = 120.0

    def delay(self, retry: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        computed = min(self.max_s, self.base_s * self.factor ** max(0, retry - 1))
        computed *= 1.0 + self.jitter * (2.0 * random.random() - 1.0)
        if retry_after_s is not None and retry_after_s > computed:
            return retry_after_s
        return max(0.0, computed)


DEFAULT = Backoff()
"""The adapters' policy: 4 attempts, 0.2 / 0.4 / 0.8 s (+-50 %) between them."""

STORE_RETRIES = Backoff(attempts=7, base_s=0.2, max_s=4.0)
"""A call to the object store or the catalog (the S3 store's calls, opening the catalog): 7
attempts, 0.2 / 0.4 / 0.8 / 1.6 / 3.2 / 4 s (+-50 %) apart, about 10 s of an
unreachable or throttling endpoint ridden out inside the call. The only level that retries it:
a task does not retry what this gave up on (see the module)."""


class RetryCounter:
    """Retries per operation in this process, thread-safe; read by the metrics exporters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, operation: str) -> None:
        """Count one retry of ``operation``."""
        with self._lock:
            self._counts[operation] += 1

    def snapshot(self) -> dict[str, int]:
        """A copy of the counts: operation -> retries so far."""
        with self._lock:
            return dict(self._counts)

    def since(self, seen: dict[str, int]) -> dict[str, int]:
        """The retries per operation made since ``seen`` (a reader's earlier view, updated in
        place to now): how an exporter moves its own counter forward without double counting."""
        with self._lock:
            new = {op: n - seen.get(op, 0) for op, n in self._counts.items()}
            seen.update(self._counts)
        return {op: n for op, n in new.items() if n > 0}


RETRIES = RetryCounter()
"""Every retry :func:`retry_call` and :func:`retry_async` made, by operation."""


def retry_after_seconds(value: str | bytes | None, *, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header in seconds, the one reading of it for every adapter: delay
    seconds (RFC 9110; a fraction as some servers send it) or an HTTP date; None when absent,
    unreadable, negative or not finite (``inf`` or ``nan`` from a server is no wait to honour)."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not value or not (value := value.strip()):
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        at = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if at.tzinfo is None:  # an HTTP date is GMT; "-0000" parses as naive
        at = at.replace(tzinfo=UTC)
    return max(0.0, (at - (now or datetime.now(UTC))).total_seconds())


def _retry_after(exc: BaseException) -> float | None:
    value = getattr(exc, "retry_after_s", None)
    return float(value) if isinstance(value, int | float) else None


def _next_delay(exc: BaseException, retry: int, policy: Backoff, operation: str) -> float | None:
    """The wait before the next attempt, or None when ``exc`` must be raised now: an inner
    helper gave up on it already, or this one's budget is spent (then it is marked,
    :func:`gave_up`)."""
    if gave_up(exc):
        return None
    after = _retry_after(exc)
    if retry >= policy.attempts or (after is not None and after > policy.max_retry_after_s):
        mark_gave_up(exc)
        return None
    RETRIES.add(operation)
    delay = policy.delay(retry, after)
    # INFO, not WARNING: a retry that succeeds is not the user's concern (it is counted in
    # flywheel_retries_total); the error after the last attempt is what they see
    log.info(
        "%s failed (%s), retry %d of %d in %.1f s",
        operation,
        type(exc).__name__,
        retry,
        policy.attempts - 1,
        delay,
    )
    return delay


_GAVE_UP = "_flywheel_retries_spent"


E = TypeVar("E", bound=BaseException)


def mark_gave_up(exc: E) -> E:
    """``exc``, marked as retried to the end of a budget (:func:`gave_up`): for an adapter whose
    client retried the call itself (pyarrow's S3 client for the warehouse's requests)."""
    setattr(exc, _GAVE_UP, True)  # noqa: B010 - a private mark on whatever was raised
    return exc


def gave_up(exc: BaseException) -> bool:
    """Whether a retry helper already spent its budget on ``exc`` or on an error ``exc`` was
    raised from (``raise ... from``; not one it met while handling another, which says nothing
    of its own cause): retrying it from an outer level would multiply attempts."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if getattr(current, _GAVE_UP, False):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


def retry_call(
    fn: Callable[[], T],
    *,
    operation: str,
    policy: Backoff = DEFAULT,
    retry_on: tuple[type[BaseException], ...] = (TransientError,),
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``fn()``, called again after a backoff while it raises one of ``retry_on``; the last
    error is raised unchanged (marked, :func:`gave_up`) once ``policy.attempts`` calls have
    failed. Anything else is raised at once, and so is an error an inner helper gave up on.
    ``operation`` names the call in logs and :data:`RETRIES` (no data in it)."""
    retry = 0
    while True:
        try:
            return fn()
        except retry_on as exc:
            retry += 1
            delay = _next_delay(exc, retry, policy, operation)
            if delay is None:
                raise
            sleep(delay)


async def retry_async(
    fn: Callable[[], Awaitable[T]],
    *,
    operation: str,
    policy: Backoff = DEFAULT,
    retry_on: tuple[type[BaseException], ...] = (TransientError,),
) -> T:
    """The coroutine counterpart of :func:`retry_call` (``fn`` makes a fresh awaitable per
    attempt)."""
    retry = 0
    while True:
        try:
            return await fn()
        except retry_on as exc:
            retry += 1
            delay = _next_delay(exc, retry, policy, operation)
            if delay is None:
                raise
            await asyncio.sleep(delay)
