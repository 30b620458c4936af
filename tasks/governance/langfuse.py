"""Erasure and retention in Langfuse (the production raw store) for the governance flows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.privacy import user_key as hash_user

_IO: dict[str, Any] = {"retries": 2, "retry_delay_seconds": [5, 30], "cache_policy": NO_CACHE}


def uses_langfuse(settings: Any) -> bool:
    """Whether traces live in Langfuse (as source or sink): erasure must reach it."""
    return "langfuse" in (settings.trace_source, settings.trace_sink)


def langfuse_erase_user(
    settings: Any, *, key: str, salt: str, trace_ids: set[str]
) -> tuple[int, int]:
    """Delete the user's traces and their scores in Langfuse: the trace ids the tables name and
    every trace whose ``userId`` hashes to the key; returns (traces, scores) deleted."""
    from infra.traces.langfuse_eraser import LangfuseEraser

    with LangfuseEraser.from_settings(settings) as eraser:
        ids = {
            t["id"]
            for t in eraser.traces()
            if t["id"] in trace_ids or (t.get("userId") and hash_user(t["userId"], salt) == key)
        }
        done = eraser.delete(ids)
    return done.traces_deleted, done.scores_deleted


def langfuse_expire(settings: Any, cutoff: datetime) -> tuple[int, int]:
    """Delete the Langfuse traces (and scores) older than ``cutoff``; returns the counts."""
    from infra.traces.langfuse_eraser import LangfuseEraser

    with LangfuseEraser.from_settings(settings) as eraser:
        done = eraser.delete(eraser.trace_ids_before(cutoff))
    return done.traces_deleted, done.scores_deleted


# the Langfuse tasks read the settings themselves: API keys never travel as task parameters


@task(**_IO)
def langfuse_erase_user_task(key: str, salt: str, trace_ids: set[str]) -> tuple[int, int]:
    """Returns (Langfuse traces deleted, Langfuse scores deleted) for the user."""
    from infra.settings import get_settings

    return langfuse_erase_user(get_settings(), key=key, salt=salt, trace_ids=trace_ids)


@task(**_IO)
def langfuse_expire_task(cutoff: datetime) -> tuple[int, int]:
    """Returns (Langfuse traces deleted, Langfuse scores deleted) past retention."""
    from infra.settings import get_settings

    return langfuse_expire(get_settings(), cutoff)
