"""The end of stage 3: one Iceberg commit of the window into ``training_examples`` (released
held rows and consent withdrawals included) and the audit events of the run (counts only)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from prefect import task

from infra.audit import audit_row
from infra.retries import IO_RETRIES
from tasks.curate.gates import STAGE

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from tasks.curate.kanon import KDecision


def commit_examples(
    catalog: Catalog,
    *,
    window: str,
    rows: list[dict[str, Any]],
    released_ids: list[str],
    opted_out: set[str] | None = None,
) -> int | None:
    """In one commit: replace the window's rows, write released held rows, and remove every
    row of users who withdrew consent; returns the table's snapshot id after the commit."""
    from pyiceberg.expressions import EqualTo, In, Or

    from infra.catalog import current_snapshot_id, replace_where

    row_filter: Any = EqualTo("window", window)
    if released_ids:
        row_filter = Or(row_filter, In("trace_id", released_ids))
    if opted_out:
        row_filter = Or(row_filter, In("user_key", sorted(opted_out)))
    replace_where(
        catalog, "training_examples", row_filter, sorted(rows, key=lambda r: r["trace_id"])
    )
    return current_snapshot_id(catalog, "training_examples")


def audit_events(
    window: str,
    *,
    dropped: Counter[str],
    pii: Counter[str],
    decision: KDecision,
    k: int,
    written: int,
    withdrawn: int = 0,
) -> list[dict[str, Any]]:
    """One audit row per decision kind (counts only)."""

    def event(kind: str, details: dict[str, Any]) -> dict[str, Any]:
        return audit_row(event_type=f"curate.{kind}", actor=STAGE, subject=window, details=details)

    return [
        event("pii_found", dict(sorted(pii.items()))),
        event("dropped", dict(sorted(dropped.items()))),
        event(
            "k_withheld",
            {
                "k": k,
                "withheld": len(decision.hold),
                "patterns_withheld": decision.patterns_held,
                "released_from_earlier_windows": len(decision.released_ids),
            },
        ),
        event("committed", {"rows": written, "removed_consent_withdrawn": withdrawn}),
    ]


@task(**IO_RETRIES)
def commit_task(
    catalog: Catalog,
    *,
    window: str,
    rows: list[dict[str, Any]],
    released_ids: list[str],
    opted_out: set[str],
) -> int | None:
    """Returns the training_examples snapshot id after replacing the window in one commit."""
    return commit_examples(
        catalog, window=window, rows=rows, released_ids=released_ids, opted_out=opted_out
    )


@task(**IO_RETRIES)
def audit_task(catalog: Catalog, rows: list[dict[str, Any]]) -> int:
    """Returns how many audit events were appended (in one commit)."""
    from infra.catalog import append_rows

    append_rows(catalog, "audit_log", rows)
    return len(rows)
