"""Object-store keys and window ids of the DESIGN layout, in one place."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

STATE_KEY = "deploy/state.json"


def parse_window_start(value: str | datetime | None, *, now: datetime | None = None) -> datetime:
    """A window start on an hour boundary (UTC); ``None`` means the last closed hour."""
    if value is None:
        now = (now or datetime.now(UTC)).astimezone(UTC)
        return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    if value != value.replace(minute=0, second=0, microsecond=0):
        raise ValueError(f"window start {value.isoformat()} is not on an hour boundary")
    return value


def window_id(start: datetime) -> str:
    """The window's name in keys and tables, e.g. ``2026-11-22T10:00:00Z``."""
    return start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rollouts_key(window: str) -> str:
    return f"rollouts/window={window}/batch.parquet"


def scores_key(window: str) -> str:
    return f"scores/window={window}/scores.parquet"


def model_prefix(version: str) -> str:
    return f"models/{version}/"


def gate_prefix(version: str) -> str:
    return f"gates/{version}/"
