"""Retry policy shared by the Prefect tasks: retry only transient I/O, never data errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
