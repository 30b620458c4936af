"""The governance commands of ``flywheel``: erase a user (forget-user), record consent,
apply retention, and the lineage of a user's data. Each handler takes the parsed arguments and
returns the exit code; flows and tasks are imported inside, so ``flywheel --help`` stays fast."""

from __future__ import annotations

import argparse
from typing import Any

from deployments.output import BAD_INPUT, emit, error


def forget_user(ns: argparse.Namespace) -> int:
    """flywheel forget-user USER_ID: erase one user everywhere (the id is hashed here)."""
    from flows.governance import forget_user_id

    r = forget_user_id(ns.user_id)
    fields = {
        "receipt": r.receipt,
        "found": r.found,
        "rows_deleted": r.rows_deleted,
        "objects_rewritten": r.objects_rewritten,
        "objects_deleted": r.objects_deleted,
        "snapshots_expired": r.snapshots_expired,
        "files_removed": r.orphan_files_removed,
        **r.langfuse_counts(),
    }
    if r.found:
        from deployments.erasure_commands import models_fields

        fields |= models_fields(r.receipt)
    emit(ns, "forget-user", fields)
    if not r.found:
        error(
            "forget-user",
            "no data found for this user id: nothing was erased (check the id; the request is "
            f"audited under receipt {r.receipt[:16]})",
        )
        return BAD_INPUT
    return 0


def consent(ns: argparse.Namespace) -> int:
    """flywheel consent grant|withdraw USER_ID."""
    from infra.catalog import open_catalog
    from infra.consent import record_consent
    from infra.privacy import user_key
    from infra.settings import get_settings

    settings = get_settings()
    key = user_key(ns.user_id, settings.salt())  # the raw id never leaves this process
    granted = ns.action == "grant"
    at = record_consent(open_catalog(settings), key=key, granted=granted, actor="cli")
    emit(
        ns,
        "consent",
        {"user_key": key, "granted": granted, "at": at.isoformat(), "mode": settings.consent_mode},
    )
    return 0


def retention(ns: argparse.Namespace) -> int:
    """flywheel retention: delete raw data past retention."""
    from flows.governance import retention as retention_flow

    r = retention_flow(days=ns.days)
    fields = {
        "days": ns.days,
        "objects_deleted": r.objects_deleted,
        "snapshots_expired": r.snapshots_expired,
        "files_removed": r.orphan_files_removed,
        **r.langfuse_counts(),
    }
    emit(ns, "retention", fields)
    return 0


def erasure_status(ns: argparse.Namespace) -> int:
    """flywheel erasure-status RECEIPT: each store and model version an erasure touched."""
    from deployments.erasure_commands import show_status

    return show_status(ns)


def erasure_resolve(ns: argparse.Namespace) -> int:
    """flywheel erasure-resolve: settle a failed erasure replacement."""
    from deployments.erasure_commands import resolve

    return resolve(ns)


def lineage(ns: argparse.Namespace) -> int:
    """flywheel lineage --user USER_ID."""
    from tasks.train.user_lineage import lineage_for_user

    found = lineage_for_user(ns.user)
    fields: dict[str, Any] = {
        "versions": found.versions,
        "evidence": {v: found.evidence[v] for v in found.versions},
    }
    if not found.versions:
        fields["note"] = "no model version was trained on this user's data"
    emit(ns, "lineage", fields)
    return 0
