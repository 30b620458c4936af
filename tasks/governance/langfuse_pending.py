"""Langfuse deletes not yet confirmed, kept per erasure receipt until a later run reads them back.

Langfuse queues trace deletes (it answers at once; its worker deletes later) and a spent daily
delete budget defers some, so ``forget-user`` may end with deletes no read-back has confirmed.
Their trace ids are kept in ``governance/langfuse_pending/<receipt>.json`` (opaque Langfuse
ids, never the user; kept only there, never in audit details, logs or run parameters). The
daily ``retention`` run re-checks every receipt's ids (:meth:`LangfuseEraser.recheck`: those
gone are confirmed, those still there are requested again), records the confirmed count on
the erasure's case (:func:`tasks.governance.reach.record_langfuse_confirmed`, which
``flywheel erasure-status`` shows) and removes the object once every delete is confirmed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prefect import task
from pydantic import BaseModel

from infra.errors import ObjectNotFound
from infra.keys import LANGFUSE_PENDING_PREFIX
from infra.task_retries import IO_RETRIES
from tasks.governance.langfuse import langfuse_recheck
from tasks.governance.reach import record_langfuse_confirmed

if TYPE_CHECKING:
    from infra.store import ObjectStore

log = logging.getLogger(__name__)


class LangfusePending(BaseModel):
    """One erasure's Langfuse deletes still to confirm (trace ids and counts; never a user)."""

    receipt: str
    requested: int  # the deletes the erasure asked for, deferred ones included (as its case)
    trace_ids: list[str]  # not confirmed yet: pending in Langfuse's queue, or deferred
    since: datetime
    rechecked_at: datetime | None = None


def pending_key(receipt: str) -> str:
    """``governance/langfuse_pending/<receipt>.json``."""
    return f"{LANGFUSE_PENDING_PREFIX}{receipt}.json"


def save_pending(
    store: ObjectStore, receipt: str, *, requested: int, trace_ids: Iterable[str]
) -> None:
    """Keep the receipt's unconfirmed trace ids for the next retention run; none: remove what
    an earlier run under this receipt kept (a rerun of forget-user replaces it)."""
    ids = sorted(set(trace_ids))
    if not ids:
        store.delete(pending_key(receipt))
        return
    pending = LangfusePending(
        receipt=receipt, requested=requested, trace_ids=ids, since=datetime.now(UTC)
    )
    store.put(pending_key(receipt), pending.model_dump_json(indent=2).encode())


def load_pending(store: ObjectStore, receipt: str) -> LangfusePending | None:
    """The receipt's unconfirmed deletes; None when every one is confirmed."""
    try:
        return LangfusePending.model_validate_json(store.get(pending_key(receipt)))
    except ObjectNotFound:
        return None


def pending_receipts(store: ObjectStore) -> list[str]:
    """The receipts with Langfuse deletes still to confirm."""
    keys = store.list(LANGFUSE_PENDING_PREFIX)
    return sorted(
        k[len(LANGFUSE_PENDING_PREFIX) : -len(".json")] for k in keys if k.endswith(".json")
    )


def recheck_receipt(settings: Any, store: ObjectStore, receipt: str) -> tuple[int, int]:
    """Read back the receipt's unconfirmed deletes (those still in Langfuse are requested
    again), record the confirmed count on its case, and keep only what is still unconfirmed
    (nothing: the object is removed). Returns (confirmed now, still pending).

    Raises:
        TransientSourceError: Langfuse still failed after the retries (the ids are kept).
    """
    pending = load_pending(store, receipt)
    if pending is None:
        return 0, 0
    done = langfuse_recheck(settings, set(pending.trace_ids))
    gone = set(done.confirmed)
    left = [t for t in pending.trace_ids if t not in gone]
    confirmed_now = len(pending.trace_ids) - len(left)
    try:
        record_langfuse_confirmed(store, receipt, pending.requested - len(left))
    except ObjectNotFound:  # forget-user stopped before its case: the ids are still re-checked
        log.warning("Langfuse re-check %s: no erasure case to record it on", receipt[:16])
    if left:
        pending.trace_ids, pending.rechecked_at = left, datetime.now(UTC)
        store.put(pending_key(receipt), pending.model_dump_json(indent=2).encode())
    else:
        store.delete(pending_key(receipt))
    return confirmed_now, len(left)


@task(**IO_RETRIES)
def recheck_receipt_task(store: ObjectStore, receipt: str) -> tuple[int, int]:
    """Returns (deletes confirmed now, still pending) for the receipt's unconfirmed Langfuse
    deletes; the trace ids stay in the store (never a task parameter or result)."""
    from infra.settings import get_settings

    return recheck_receipt(get_settings(), store, receipt)
