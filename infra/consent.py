"""Consent to training, as PIPA asks: one row per change in ``flywheel.consent`` (the latest row
of a user wins), written by the CLI (``flywheel consent grant|withdraw USER_ID``), the gateway's
admin API (``POST /admin/consent``) and the simulator.

Users are named by their salted key only. An erasure (``forget-user``) deletes the user's rows
and leaves a *tombstone*: a row keyed by the erasure receipt (``sha256("flywheel-forget:" +
key)``, not the key), consent false. A forgotten user is then never trained on again unless a
grant newer than the tombstone arrives (they opt in anew).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from infra.audit import record_event
from infra.catalog import append_rows

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog


def erasure_receipt(key: str) -> str:
    """The id an erasure is audited and tombstoned under (not the key itself)."""
    return hashlib.sha256(f"flywheel-forget:{key}".encode()).hexdigest()


def record_consent(catalog: Catalog, *, key: str, granted: bool, actor: str) -> datetime:
    """Append the user's new consent state and audit it (subject: the key; forget-user removes
    audit rows that mention it); returns the time recorded."""
    at = datetime.now(UTC)
    append_rows(
        catalog, "consent", [{"user_key": key, "consent_to_training": granted, "updated_at": at}]
    )
    record_event(
        catalog,
        event_type="consent.grant" if granted else "consent.withdraw",
        actor=actor,
        subject=key,
        details={"granted": granted},
        at=at,
    )
    return at


def tombstone(catalog: Catalog, key: str) -> None:
    """Mark an erased user so that no later trace of theirs is eligible without a new grant."""
    row = {
        "user_key": erasure_receipt(key),
        "consent_to_training": False,
        "updated_at": datetime.now(UTC),
    }
    append_rows(catalog, "consent", [row])
