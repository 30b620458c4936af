"""The one audit writer: one row in ``flywheel.audit_log`` per decision, with its evidence as
JSON (counts, ids and types, never personal data)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from infra.catalog import append_rows
from infra.errors import TransientCatalogError, TransientError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

log = logging.getLogger(__name__)


def audit_row(
    *,
    event_type: str,
    actor: str,
    subject: str,
    details: dict[str, Any],
    at: datetime | None = None,
) -> dict[str, Any]:
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
    """Append one audit event (lost commit races are retried); returns its id.

    With ``best_effort`` a failure is logged and None returned instead of raised: an audit
    failure must never block a rollback.
    """
    row = audit_row(event_type=event_type, actor=actor, subject=subject, details=details, at=at)
    for attempt in range(attempts):
        try:
            append_rows(catalog, "audit_log", [row])
            return str(row["event_id"])
        except TransientError as exc:
            log.warning("audit %s attempt %d lost a race: %s", event_type, attempt + 1, exc)
        except Exception as exc:  # noqa: BLE001 - re-raised below unless best effort
            if not best_effort:
                raise
            log.warning("audit %s attempt %d failed: %s", event_type, attempt + 1, exc)
        time.sleep(0.2 * (attempt + 1))
    if not best_effort:
        raise TransientCatalogError(f"audit event {event_type} for {subject} not written")
    log.error("audit event %s for %s was not written", event_type, subject)
    return None
