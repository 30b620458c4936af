"""Test-only crash points: the fault-injection suite kills a stage with ``SIGKILL`` at an
exact point (in the middle of an Iceberg commit, between a model's files and its ``_COMPLETE``
marker) to prove that a rerun repairs whatever the crash left.

Nothing here runs unless ``FLYWHEEL_TEST_KILL_AT`` is set; production never sets it. The value
is ``EVENT[:KEY_PREFIX][#N]``: the process kills itself at the ``N``-th (default first) event
named ``EVENT`` whose key starts with ``KEY_PREFIX``. Events:

- ``store.put``: just before an object store write (``put``, ``put_file``, ``put_if``) of the key;
- ``catalog.commit``: inside an Iceberg commit of the table named as key, after its data and
  manifest files are written and before the catalog points at the new metadata.

A hook in the code, rather than a parent killing on a marker file, makes the point exact and
the test deterministic; the kill itself is a real ``SIGKILL`` (no ``finally``, no ``atexit``).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

ENV = "FLYWHEEL_TEST_KILL_AT"

_lock = threading.Lock()
_seen: dict[str, int] = {}


def _parse(spec: str) -> tuple[str, str, int]:
    point, _, count = spec.partition("#")
    event, _, prefix = point.partition(":")
    return event, prefix, int(count or 1)


def kill_point(event: str, key: str = "") -> None:
    """SIGKILL this process when ``FLYWHEEL_TEST_KILL_AT`` names this event (test-only)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    want, prefix, count = _parse(spec)
    if want != event or not key.startswith(prefix):
        return
    with _lock:
        _seen[spec] = _seen.get(spec, 0) + 1
        if _seen[spec] == count:
            os.kill(os.getpid(), signal.SIGKILL)


def arm_catalog(catalog: Any) -> Any:
    """``catalog`` with a ``catalog.commit`` kill point in its ``commit_table`` when the
    suite asked for one (unchanged otherwise)."""
    spec = os.environ.get(ENV)
    if not spec or not spec.startswith("catalog.commit"):
        return catalog
    commit = catalog.commit_table

    def commit_table(table: Any, *args: Any, **kwargs: Any) -> Any:
        kill_point("catalog.commit", ".".join(table.name()[1:]) or str(table.name()))
        return commit(table, *args, **kwargs)

    catalog.commit_table = commit_table
    return catalog
