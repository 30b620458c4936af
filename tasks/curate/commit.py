"""The end of stage 3: one Iceberg commit of the window into ``training_examples`` (released
held rows and consent withdrawals included) with what goes beside it (held-back rows,
quarantine, dedup index: :func:`commit_window`), and the audit events of the run (counts only)
and of each trace (:func:`audit_window`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prefect import task

from infra.audit import AuditRow, audit_row
from infra.task_retries import IO_RETRIES
from tasks.curate.dedup import record_kept_task
from tasks.curate.gates import STAGE
from tasks.curate.kanon import held_task
from tasks.curate.trace_audit import trace_audit_rows, trace_audit_task
from tasks.datasets import Quarantine, replace_quarantine_task

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.runtime import Runtime
    from tasks.curate.gates import Gated
    from tasks.curate.kanon import KDecision, KState
    from tasks.curate.rows import CuratedExample


def commit_examples(
    catalog: Catalog,
    *,
    window: str,
    rows: list[CuratedExample],
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
) -> list[AuditRow]:
    """One audit row per decision kind (counts only)."""

    def event(kind: str, details: dict[str, Any]) -> AuditRow:
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
    rows: list[CuratedExample],
    released_ids: list[str],
    opted_out: set[str],
) -> int | None:
    """Returns the training_examples snapshot id after replacing the window in one commit."""
    return commit_examples(
        catalog, window=window, rows=rows, released_ids=released_ids, opted_out=opted_out
    )


@task(**IO_RETRIES)
def audit_task(catalog: Catalog, rows: list[AuditRow]) -> int:
    """Returns how many audit events were appended (in one commit)."""
    from infra.catalog import append_rows

    append_rows(catalog, "audit_log", rows)
    return len(rows)


@dataclass
class Curation:
    """What curate decided for one window, which its commit, audit and counts read: the gates'
    drops, k-anonymity's decision and the state it read, the quarantined rows, and the users
    excluded from training, and what the run's canaries showed."""

    window: str
    gated: Gated
    decision: KDecision
    state: KState
    quarantined: list[Quarantine]
    opted_out: set[str]
    canary: dict[str, Any] | None = None  # the canary check's audit details (no values)


def commit_window(rt: Runtime, done: Curation) -> tuple[int | None, list[AuditRow]]:
    """Write the window's curation: the one commit into ``training_examples``, the rows
    k-anonymity holds back, the quarantine and the dedup index of the rows kept. Returns the
    table's snapshot id after the commit and the per-trace audit rows (built before the commit,
    which drops the per-finding entity types from the rows it writes; :func:`audit_window`
    writes them)."""
    cfg, window, decision = rt.settings.curate, done.window, done.decision
    per_trace = trace_audit_rows(
        window,
        released=[r for r in decision.release if r["window"] == window],
        held=decision.hold,
        quarantined=done.quarantined,
        k=cfg.k_anonymity,
    )
    snapshot = commit_task(
        rt.catalog,
        window=window,
        rows=decision.release,
        released_ids=decision.released_ids,
        opted_out=done.opted_out,
    )
    in_table = done.state.in_table | set(decision.released_ids)
    held_task(
        rt.store, window=window, hold=decision.hold, in_table=in_table, opted_out=done.opted_out
    )
    replace_quarantine_task(rt.catalog, stage="curate", window=window, rows=done.quarantined)
    record_kept_task(
        rt.store,
        window=window,
        keys=[r["_dedup_key"] for r in done.gated.kept],
        horizon_days=cfg.dedup_days,
    )
    return snapshot, per_trace


def audit_window(
    rt: Runtime, done: Curation, *, pii: Counter[str], per_trace: list[AuditRow]
) -> None:
    """Append the run's audit events (counts only: :func:`audit_events`, and its canary check)
    and replace the window's per-trace audit rows."""
    audit = audit_events(
        done.window,
        dropped=done.gated.dropped,
        pii=pii,
        decision=done.decision,
        k=rt.settings.curate.k_anonymity,
        written=len(done.decision.release),
        withdrawn=done.state.withdrawn,
    )
    if done.canary is not None:  # the check the weekly run reads (a failed one audits itself)
        audit.append(
            audit_row(
                event_type="curate.canary_check",
                actor=STAGE,
                subject=done.window,
                details=done.canary,
            )
        )
    audit_task(rt.catalog, audit)
    trace_audit_task(rt.catalog, done.window, per_trace)
