"""Audit events: one row in ``flywheel.audit_log`` per decision, with its evidence as JSON."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from infra.catalog import append_rows

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog


def audit_row(
    *, event_type: str, actor: str, subject: str, details: dict[str, Any]
) -> dict[str, Any]:
    """An audit_log row; ``details`` must hold counts, ids and types, never personal data."""
    return {
        "event_id": uuid.uuid4().hex,
        "at": datetime.now(UTC),
        "event_type": event_type,
        "actor": actor,
        "subject": subject,
        "details": json.dumps(details, sort_keys=True, default=str),
    }


def record_event(
    catalog: Catalog, *, event_type: str, actor: str, subject: str, details: dict[str, Any]
) -> str:
    """Append one audit event; returns its id."""
    row = audit_row(event_type=event_type, actor=actor, subject=subject, details=details)
    append_rows(catalog, "audit_log", [row])
    return str(row["event_id"])
