"""Per-trace audit events of a curate run, as the design asks: one ``audit_log`` row per
anonymised trace (entity types and counts, never values), per quarantined trace (the reason)
and per trace held back by k-anonymity. Each is keyed by window and trace
(``subject = "<window>/<trace id>"``, actor ``curate.trace``): a rerun replaces the window's
rows in one commit instead of appending duplicates."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prefect import task

from infra.audit import AuditRow, audit_row
from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from tasks.curate.rows import CuratedExample
    from tasks.datasets import Quarantine

ACTOR = "curate.trace"


def _row(window: str, trace_id: str, event_type: str, details: dict[str, Any]) -> AuditRow:
    row = audit_row(
        event_type=event_type, actor=ACTOR, subject=f"{window}/{trace_id}", details=details
    )
    row["event_id"] = hashlib.sha256(f"{ACTOR}:{window}:{trace_id}".encode()).hexdigest()[:32]
    return row


def trace_audit_rows(
    window: str,
    *,
    released: Sequence[CuratedExample],
    held: Sequence[CuratedExample],
    quarantined: Sequence[Quarantine],
    k: int,
) -> list[AuditRow]:
    """One row per trace: ``curate.trace_anonymised`` (``{"entities": {type: count}}``),
    ``curate.trace_held`` (the k-anonymity reason) or ``curate.trace_quarantined`` (the
    quarantine reason). A trace appears once; quarantine wins, then held."""
    rows: dict[str, AuditRow] = {}
    for ex in released:
        findings = Counter(ex.get("_pii_findings", ex.get("pii_entities") or []))
        rows[ex["trace_id"]] = _row(
            window,
            ex["trace_id"],
            "curate.trace_anonymised",
            {"entities": dict(sorted(findings.items())), "found": sum(findings.values())},
        )
    for ex in held:
        reason = f"k-anonymity: fewer than {k} users share its question pattern"
        rows[ex["trace_id"]] = _row(window, ex["trace_id"], "curate.trace_held", {"reason": reason})
    for q in quarantined:
        trace_id = json.loads(q["record"]).get("trace_id")
        if trace_id:
            rows[trace_id] = _row(
                window, trace_id, "curate.trace_quarantined", {"reason": q["reason"]}
            )
    return [rows[t] for t in sorted(rows)]


def replace_trace_audit(catalog: Catalog, window: str, rows: list[AuditRow]) -> int:
    """Replace the window's per-trace audit rows in one commit; returns how many it holds."""
    from pyiceberg.expressions import And, EqualTo, StartsWith

    from infra.catalog import replace_where

    where = And(EqualTo("actor", ACTOR), StartsWith("subject", f"{window}/"))
    replace_where(catalog, "audit_log", where, rows)
    return len(rows)


@task(**IO_RETRIES)
def trace_audit_task(catalog: Catalog, window: str, rows: list[AuditRow]) -> int:
    """Returns how many per-trace audit rows the window now has."""
    return replace_trace_audit(catalog, window, rows)
