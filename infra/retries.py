"""The one retry policy of flywheel's Prefect tasks: retry only transient I/O
(:class:`~infra.errors.TransientError`, which every adapter raises for timeouts, throttling,
5xx and lost commit races), with backoff and jitter; never a data or configuration error.

Use ``@task(**IO_RETRIES)`` on every task that does I/O; a task with no I/O needs no retries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect.cache_policies import NO_CACHE

from infra.errors import TransientError

RetryCondition = Callable[[Any, Any, Any], bool]


def retry_on(*errors: type[BaseException]) -> RetryCondition:
    """A ``retry_condition_fn`` that retries a failed task only when it raised one of ``errors``
    (a transient failure); anything else is a data or configuration error and fails at once."""

    def condition(task: Any, task_run: Any, state: Any) -> bool:
        try:
            state.result()
        except errors:
            return True
        except Exception:  # noqa: BLE001 - not transient: no retry
            return False
        return False

    return condition


IO_RETRIES: dict[str, Any] = {
    "retries": 3,
    "retry_delay_seconds": [2, 5, 15],
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": retry_on(TransientError),
    "cache_policy": NO_CACHE,
}
"""The task options of every I/O task: 3 retries after 2, 5 and 15 s (+-50 % jitter), only for
transient errors; no result caching (stages are keyed by window and replace their output)."""
