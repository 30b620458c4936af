"""Where the data is, when a stage read an empty window: right after ``flywheel simulate`` the
traffic is in the current hour, while ``collect`` with no window reads the last closed one."""

from __future__ import annotations

import re

from infra.keys import ROLLOUTS_PREFIX, SCORES_CACHE_PREFIX, SCORES_PREFIX, TRACES_PREFIX
from infra.store import ObjectStore

_SPOOL_HOUR = re.compile(r"dt=(\d{4}-\d{2}-\d{2})/hour=(\d{2})/")
_WINDOW = re.compile(r"window=(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)/")


def newest_spool_hour(store: ObjectStore) -> str | None:
    """The newest hour with files in the trace spool, as a window id."""
    hours = {
        f"{m.group(1)}T{m.group(2)}:00:00Z"
        for key in store.list(TRACES_PREFIX)
        if (m := _SPOOL_HOUR.search(key))
    }
    return max(hours, default=None)


def newest_window(store: ObjectStore, prefix: str) -> str | None:
    """The newest window with an output of a stage (``rollouts/``, ``scores/``)."""
    windows = {
        m.group(1)
        for key in store.list(prefix)
        if not key.startswith(SCORES_CACHE_PREFIX) and (m := _WINDOW.search(key))
    }
    return max(windows, default=None)


def empty_window_note(store: ObjectStore, *, stage: str, window: str, source: str) -> str:
    """What to do about an empty ``window``: which window holds data, if any."""
    if stage == "collect":
        if source != "spool":
            return f"no traces in {window} at the trace source ({source})"
        newest, what, first = (
            newest_spool_hour(store),
            "traffic",
            "send traffic through the gateway",
        )
    elif stage == "score":
        newest, what, first = newest_window(store, ROLLOUTS_PREFIX), "rollouts", "run collect"
    else:
        newest, what, first = newest_window(store, SCORES_PREFIX), "scores", "run score"
    if newest is None:
        return f"nothing read: no {what} anywhere yet ({first} first)"
    if newest == window:
        return f"nothing read: {window} is the newest window with {what}"
    return f"nothing read: the newest {what} is in {newest}: pass --window-start {newest}"
