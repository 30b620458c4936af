"""Governance flows: ``forget-user`` (on demand) and ``retention`` (daily)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prefect import flow

from infra.catalog import SCHEMAS
from infra.flow_docs import described
from infra.lease import erasure_lease
from infra.parameters import Days, UserKey
from infra.privacy import user_key as hash_user
from infra.runtime import Runtime
from tasks.governance.erasure import Erasure, check_user_key
from tasks.governance.forget import erase_user, publish_forget_user
from tasks.governance.langfuse import langfuse_expire_task, uses_langfuse
from tasks.governance.langfuse_pending import pending_receipts, recheck_receipt_task
from tasks.governance.maintenance import expire_task
from tasks.governance.reach import publish_gauges
from tasks.governance.retention import (
    audit_retention,
    delete_objects_task,
    expired_raw_objects,
    publish_retention,
)


@described
@flow(name="forget-user", log_prints=False)
def forget_user(user_key: UserKey) -> Erasure:
    """Erase one user everywhere: their rows in every table (training examples, preference
    pairs, consent, audit and quarantine mentions), their lines in the raw trace spool, their
    rows in rollouts, scores and held-back examples, their traces and scores in Langfuse (when
    Langfuse is the trace source or sink; Langfuse queues deletes, and the daily retention
    run re-checks those a read-back could not confirm yet); then expire old table snapshots
    and delete the unreferenced files so the data is physically gone. The audit log records a receipt
    derived from the key, not the key: one per request, so asking again never overwrites
    an earlier request's records. Every model version that trained on the user's data
    is recorded with the receipt; the weekly run replaces a serving one before the deadline
    (`flywheel erasure-status RECEIPT`). Runs alone: it waits for the curate, collect and
    score runs in flight to write what they read, and they wait for it (the erasure lease);
    a second request for the same person waits its turn and gets a case of its own.

    Never type a user id or e-mail address here: run parameters are stored for good. Run
    `flywheel forget-user USER_ID` instead, which hashes the id on your machine and starts
    this flow with the key.

    Args:
        user_key: The user's salted key: 64 lowercase hex characters, never the raw user id
            or e-mail (anything else is refused before a run exists).
    """
    key = check_user_key(user_key)
    rt = Runtime.from_env()
    # alone: no other erasure, and no curate, collect or score between a read and its write
    with erasure_lease(rt.store, rt.settings).exclusive(), rt.reporting("forget-user"):
        result = erase_user(rt, key)
    publish_forget_user(result)
    return result


def forget_user_id(user_id: str) -> Erasure:
    """Hash a raw user id here (with the configured salt) and run :func:`forget_user` with the
    key only: what the CLI calls, so the raw id never reaches Prefect's database."""
    return forget_user(user_key=hash_user(user_id, Runtime.from_env().settings.salt()))


@described
@flow(name="retention", log_prints=False)
def retention(days: Days | None = None) -> Erasure:
    """Delete raw data past its retention period (default FLYWHEEL_RAW_RETENTION_DAYS, 90):
    trace spool files, rollouts, scores and held-back examples older than that many days;
    traces and scores in Langfuse older than that (when Langfuse is the trace source or sink;
    a score past the cutoff on a trace with no observation too),
    and a read-back of the Langfuse deletes earlier forget-user runs could not confirm yet
    (Langfuse queues deletes; those still there are requested again); then expire table
    snapshots older than the cutoff and delete the files no remaining snapshot needs. Curated training examples and the audit log are kept. Runs daily, alone: it waits for the curate,
    collect and score runs in flight (the erasure lease), and they wait for it.

    Args:
        days: Keep raw data this many days (0 deletes all of it and every older table
            snapshot). Empty: FLYWHEEL_RAW_RETENTION_DAYS.
    """
    rt = Runtime.from_env()
    keep_days = rt.settings.raw_retention_days if days is None else days
    cutoff = datetime.now(UTC) - timedelta(days=keep_days)
    result = Erasure()
    lease = erasure_lease(rt.store, rt.settings)  # curate never writes back what this deletes
    with lease.exclusive(), rt.reporting("retention") as report:
        result.objects_deleted = delete_objects_task(
            rt.store, expired_raw_objects(rt.store, cutoff)
        )
        if uses_langfuse(rt.settings):
            for receipt in pending_receipts(rt.store):  # earlier erasures' unconfirmed deletes
                result.add_recheck(*recheck_receipt_task(rt.store, receipt))
            result.add_langfuse(langfuse_expire_task(cutoff))
        expired, removed = expire_task(
            rt.catalog, rt.store, sorted(SCHEMAS), cutoff, rt.settings.orphan_min_age_hours * 3600
        )
        result.snapshots_expired, result.orphan_files_removed = expired, removed
        audit_retention(rt.catalog, result, cutoff=cutoff, days=keep_days)
        report.records("deleted", result.objects_deleted)
    publish_gauges(rt)  # daily: the open erasures' age moves on even when nothing else does
    publish_retention(result, days=keep_days)
    return result
