"""Raw-data retention: the raw objects (spool, rollouts, scores, held rows) past their
retention period, and their deletion; the ``retention`` run's audit event, artifact and log
line."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from infra.audit import record_event
from infra.keys import RAW_PREFIXES
from infra.task_retries import IO_RETRIES
from tasks.governance.erasure import Erasure, erasure_details, erasure_markdown

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

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


def audit_retention(catalog: Catalog, result: Erasure, *, cutoff: datetime, days: int) -> None:
    """The run's audit event (``governance.retention``): the cutoff, the days kept, and the
    counts (deletes, Langfuse re-checks)."""
    record_event(
        catalog,
        event_type="governance.retention",
        actor="retention",
        subject=cutoff.strftime("%Y-%m-%dT%H:%M:%SZ"),
        details={"days": days, **erasure_details(result), **result.recheck_counts()},
    )


def publish_retention(result: Erasure, *, days: int) -> None:
    """The run's ``retention`` artifact (counts only) and its log line."""
    create_markdown_artifact(
        key="retention", markdown=erasure_markdown("retention", result), description="retention"
    )
    get_run_logger().info("retention (%d days): %s", days, erasure_details(result))
