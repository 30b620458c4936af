"""The task options of every Prefect task that does I/O (:mod:`infra.retries` is the policy):
apart from the retry helpers so that a process that only calls adapters (the gateway, a CLI
command reading the store) does not import Prefect."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect.cache_policies import NO_CACHE

from infra.errors import TransientError
from infra.retries import gave_up

RetryCondition = Callable[[Any, Any, Any], bool]


def retry_on(*errors: type[BaseException]) -> RetryCondition:
    """A ``retry_condition_fn`` that retries a failed task only when it raised one of ``errors``
    (a transient failure) that no adapter has already retried (:func:`infra.retries.gave_up`:
    retries at one level); anything else is a data or configuration error and fails at once."""

    def condition(task: Any, task_run: Any, state: Any) -> bool:  # noqa: ARG001 - Prefect's
        try:
            state.result()
        except errors as exc:
            return not gave_up(exc)
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
transient errors no adapter has retried (one raised by code outside the adapters); no result
caching (stages are keyed by window and replace their
output)."""
