"""The one audit writer: one row in ``flywheel.audit_log`` per decision, with its evidence as
JSON (counts, ids and types, never personal data)."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict

from infra.catalog import append_rows
from infra.retries import Backoff, retry_call

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

log = logging.getLogger(__name__)


class AuditRow(TypedDict):
    """An ``audit_log`` row (infra/catalog_schemas.py); ``details`` is JSON."""

    event_id: str
    at: datetime
    event_type: str
    actor: str
    subject: str
    details: str


def audit_row(
    *,
    event_type: str,
    actor: str,
    subject: str,
    details: dict[str, Any],
    at: datetime | None = None,
) -> AuditRow:
    """An audit_log row; ``details`` must hold counts, ids and types, never personal data."""
    return {
        "event_id": uuid.uuid4().hex,
        "at": at or datetime.now(UTC),
        "event_type": event_type,
        "actor": actor,
        "subject": subject,
        "details": json.dumps(details, sort_keys=True, default=str),
    }


def record_event(
    catalog: Catalog,
    *,
    event_type: str,
    actor: str,
    subject: str,
    details: dict[str, Any],
    at: datetime | None = None,
    best_effort: bool = False,
    attempts: int = 3,
) -> str | None:
    """Append one audit event (lost commit races and other transient failures are retried,
    ``attempts`` calls in all); returns its id.

    With ``best_effort`` a failure is logged and None returned instead of raised: an audit
    failure must never block a rollback.

    Raises:
        TransientCatalogError: every attempt lost a race (unless ``best_effort``).
    """
    row = audit_row(event_type=event_type, actor=actor, subject=subject, details=details, at=at)
    try:
        retry_call(
            lambda: append_rows(catalog, "audit_log", [row]),
            operation="audit.append",
            policy=Backoff(attempts=attempts),
        )
    except Exception as exc:  # noqa: BLE001 - re-raised unless best effort
        if not best_effort:
            raise
        log.error("audit event %s for %s was not written: %s", event_type, subject, exc)
        return None
    return str(row["event_id"])
