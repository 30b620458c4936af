"""Retries at one level: a retry helper marks the error it gives up on, and neither an outer
helper nor a task's retry condition retries a marked error again (one store call used to run up
to 20 times: 5 attempts in the adapter, in each of 4 task attempts)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from infra.errors import ConfigError, TransientError, TransientStoreError
from infra.retries import Backoff, gave_up, retry_call
from infra.task_retries import IO_RETRIES

QUICK = Backoff(attempts=3, base_s=0.0)


def failing(calls: list[int], error: BaseException) -> Any:
    def call() -> None:
        calls.append(1)
        raise error

    return call


def state_raising(exc: BaseException) -> Any:
    """What Prefect hands a retry condition: a state whose result() raises the task's error."""

    def result() -> None:
        raise exc

    return SimpleNamespace(result=result)


def test_an_error_a_helper_gave_up_on_is_marked_and_a_fresh_one_is_not() -> None:
    calls: list[int] = []
    with pytest.raises(TransientStoreError) as err:
        retry_call(failing(calls, TransientStoreError("503")), operation="t", policy=QUICK)
    assert len(calls) == 3 and gave_up(err.value)
    assert not gave_up(TransientStoreError("503"))


def test_an_outer_helper_does_not_retry_what_an_inner_one_gave_up_on() -> None:
    calls: list[int] = []

    def inner() -> None:
        retry_call(failing(calls, TransientStoreError("503")), operation="in", policy=QUICK)

    with pytest.raises(TransientStoreError):
        retry_call(inner, operation="out", policy=Backoff(attempts=4, base_s=0.0))
    assert len(calls) == 3  # not 3 x 4


def test_the_task_condition_retries_only_transient_errors_no_helper_retried() -> None:
    condition = IO_RETRIES["retry_condition_fn"]
    assert condition(None, None, state_raising(TransientError("lost a race")))
    assert not condition(None, None, state_raising(ConfigError("no bucket")))
    with pytest.raises(TransientStoreError) as err:
        retry_call(failing([], TransientStoreError("503")), operation="t", policy=QUICK)
    assert not condition(None, None, state_raising(err.value))
    try:  # a task that wrapped the spent error in another transient one
        raise TransientError("the stage's write failed") from err.value
    except TransientError as wrapped:
        assert not condition(None, None, state_raising(wrapped))
