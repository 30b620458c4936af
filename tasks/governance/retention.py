"""Raw-data retention: the raw objects (spool, rollouts, scores, held rows) past their
retention period, and their deletion."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING

from prefect import task

from infra.keys import RAW_PREFIXES
from infra.retries import IO_RETRIES

if TYPE_CHECKING:
    from infra.store import ObjectStore

_DATED = re.compile(r"(?:dt=(\d{4}-\d{2}-\d{2})|window=(\d{4}-\d{2}-\d{2}T[\d:]+Z))")


def expired_raw_objects(store: ObjectStore, cutoff: datetime) -> list[str]:
    """Raw objects (spool, rollouts, scores, held rows) dated before ``cutoff``."""
    expired = []
    for prefix in RAW_PREFIXES:
        for obj in store.list(prefix):
            m = _DATED.search(obj)
            if not m:
                continue
            if m.group(1):
                old = m.group(1) < cutoff.strftime("%Y-%m-%d")
            else:
                old = m.group(2) < cutoff.strftime("%Y-%m-%dT%H:%M:%SZ")
            if old:
                expired.append(obj)
    return expired


@task(**IO_RETRIES)
def delete_objects_task(store: ObjectStore, keys: list[str]) -> int:
    """Returns how many objects were deleted."""
    for obj in keys:
        store.delete(obj)
    return len(keys)
