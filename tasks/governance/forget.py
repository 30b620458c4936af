"""The ``forget-user`` flow's steps (flows/governance.py): the user erased from every store
(:func:`erase_user`, with the stores it deletes from in :mod:`.erasure`), the user's traces
in Langfuse, the run's audit event, its artifact and log line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact

from infra.audit import record_event
from infra.consent import tombstone
from tasks.governance.erasure import (
    USER_TABLES,
    Erasure,
    delete_rows_task,
    erasure_details,
    erasure_markdown,
    scrub_objects_task,
    user_traces_task,
)
from tasks.governance.erasure_steps import open_case
from tasks.governance.langfuse import langfuse_erase_user_task, uses_langfuse
from tasks.governance.langfuse_pending import save_pending
from tasks.governance.maintenance import expire_task, store_key
from tasks.governance.reach import reached_versions_task
from tasks.governance.receipts import request_receipts_task
from tasks.train.erasures import record_erasure

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.runtime import Runtime

ACTOR = "forget-user"


def erase_user(rt: Runtime, key: str) -> Erasure:
    """Erase the user of salted ``key`` from every store (run under the erasure lease, held
    exclusively): a receipt of its own for this request, the user's rows, spool lines and
    objects, their Langfuse traces; then, when anything was found, the tombstone, the model
    versions that trained on them recorded, old snapshots expired and the erasure's case
    opened. Returns what was erased."""
    salt = rt.settings.salt()
    receipt, earlier = request_receipts_task(rt.store, rt.catalog, key)  # one per request
    result = Erasure(receipt=receipt)
    trace_ids = user_traces_task(rt.catalog, rt.store, key, salt)
    reached = reached_versions_task(rt.store, rt.catalog, key)  # before the rows go
    result.rows_deleted = delete_rows_task(rt.catalog, key, trace_ids)
    skip = store_key(rt.store, rt.settings.resolved_warehouse.rstrip("/") + "/")
    rewritten, deleted = scrub_objects_task(rt.store, key, salt, trace_ids, skip)
    result.objects_rewritten, result.objects_deleted = rewritten, deleted
    if uses_langfuse(rt.settings):  # the production raw store
        erase_in_langfuse(rt, result, key=key, salt=salt, trace_ids=trace_ids)
    result.found = bool(trace_ids) or result.erased_anything()
    if result.found:  # an unknown id changes nothing (and exits 2 in the CLI)
        tombstone(rt.catalog, key)  # never trained on again unless they opt in anew
        record_erasure(rt.store, receipt=result.receipt, trace_ids=trace_ids)
    audit_forget_user(rt.catalog, result)
    if result.found:  # nothing deleted: no old snapshot holds this user's data
        expired, removed = expire_task(
            rt.catalog, rt.store, USER_TABLES, None, rt.settings.orphan_min_age_hours * 3600
        )
        result.snapshots_expired, result.orphan_files_removed = expired, removed
        open_case(rt, result, reached, langfuse=uses_langfuse(rt.settings), earlier=earlier)
    else:
        get_run_logger().warning("forget-user %s: no data found for this key", result.receipt[:16])
    return result


def erase_in_langfuse(
    rt: Runtime, result: Erasure, *, key: str, salt: str, trace_ids: set[str]
) -> None:
    """Delete the user's traces and scores in Langfuse (the production raw store), add the
    counts to ``result``, keep the deletes a read-back could not confirm yet for the next
    retention run, and audit the request (``governance.langfuse_erasure``)."""
    done = langfuse_erase_user_task(key, salt, trace_ids)
    result.add_langfuse(done)
    unconfirmed = [*done.pending, *done.deferred]  # the next retention run re-checks
    requested = len(done.requested) + len(done.deferred)  # as the case counts them
    save_pending(rt.store, result.receipt, requested=requested, trace_ids=unconfirmed)
    record_event(
        rt.catalog,
        event_type="governance.langfuse_erasure",
        actor=ACTOR,
        subject=result.receipt,
        details={"store": "langfuse", **done.counts()},
    )


def audit_forget_user(catalog: Catalog, result: Erasure) -> None:
    """The run's audit event (``governance.forget_user``): the receipt, never the key, with
    the counts and whether any data was found."""
    record_event(
        catalog,
        event_type="governance.forget_user",
        actor=ACTOR,
        subject=result.receipt,
        details={**erasure_details(result), "found": result.found},
    )


def publish_forget_user(result: Erasure) -> None:
    """The run's ``forget-user`` artifact (counts only) and its log line (the receipt's
    prefix and the counts)."""
    create_markdown_artifact(
        key="forget-user", markdown=erasure_markdown("forget-user", result), description="erasure"
    )
    get_run_logger().info("forget-user %s: %s", result.receipt[:16], erasure_details(result))
