"""Erasure and retention in Langfuse (the production raw store) for the governance flows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import task

from infra.task_retries import IO_RETRIES
from infra.traces.langfuse_eraser import LangfuseDeletion, LangfuseEraser


def uses_langfuse(settings: Any) -> bool:
    """Whether traces live in Langfuse (as source or sink): erasure must reach it."""
    return "langfuse" in (settings.trace_source, settings.trace_sink)


def langfuse_erase_user(
    settings: Any, *, key: str, salt: str, trace_ids: set[str]
) -> LangfuseDeletion:
    """Delete the user's traces in Langfuse (their scores go with them): every trace listed
    under the raw user id whose hash is ``key`` and those of ``trace_ids`` Langfuse holds; the
    result says which deletes a read-back confirmed and which are pending."""
    with LangfuseEraser.from_settings(settings) as eraser:
        return eraser.erase_user(key=key, salt=salt, known_trace_ids=trace_ids)


def langfuse_expire(settings: Any, cutoff: datetime) -> LangfuseDeletion:
    """Delete the Langfuse traces (and their scores) older than ``cutoff``."""
    with LangfuseEraser.from_settings(settings) as eraser:
        return eraser.expire(cutoff)


def langfuse_recheck(settings: Any, trace_ids: set[str]) -> LangfuseDeletion:
    """Re-check deletes left pending by an earlier run: confirmed ones are gone; those still
    there are requested again and stay pending."""
    with LangfuseEraser.from_settings(settings) as eraser:
        return eraser.recheck(trace_ids)


# the Langfuse tasks read the settings themselves: API keys never travel as task parameters


@task(**IO_RETRIES)
def langfuse_erase_user_task(key: str, salt: str, trace_ids: set[str]) -> LangfuseDeletion:
    """Returns the Langfuse trace deletes requested for the user, and which are confirmed."""
    from infra.settings import get_settings

    return langfuse_erase_user(get_settings(), key=key, salt=salt, trace_ids=trace_ids)


@task(**IO_RETRIES)
def langfuse_expire_task(cutoff: datetime) -> LangfuseDeletion:
    """Returns the Langfuse trace deletes requested past retention, and which are confirmed."""
    from infra.settings import get_settings

    return langfuse_expire(get_settings(), cutoff)
