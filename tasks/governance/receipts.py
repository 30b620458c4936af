"""One receipt per ``forget-user`` request.

A person may ask to be forgotten more than once (they came back, or a request is repeated).
Each request gets its own receipt, so nothing a later request writes replaces what an earlier
one recorded: its case (``governance/models/<receipt>.json``: a pending model replacement, its
deadline, its steps), its ledger of erased trace ids (``governance/erased/<receipt>.json``,
which keeps the training sets it cut into reproducible) and its unconfirmed Langfuse deletes.

The first request's receipt is ``sha256("flywheel-forget:" + key)`` (as before, and the key of
the user's consent tombstone); the n-th one's is ``sha256("flywheel-forget:" + key + ":" + n)``.
A person holding the key can therefore still prove every erasure happened (compute the
receipts in turn), while no receipt reveals the key. A receipt is taken once any of its
records exists: its claim (``governance/receipts/<receipt>.json``, created create-only by the
request that takes it, before anything else), its ledger entry, its case, or its
``governance.forget_user`` audit event (requests from before claims existed). Two requests for
one person at once (forget-user runs alone, but a lease can expire) cannot take the same
receipt: the second one's create fails and it takes the next.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from prefect import task

from infra.consent import erasure_receipt
from infra.errors import PreconditionFailed
from infra.keys import ERASED_PREFIX, ERASURE_CASES_PREFIX
from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.store import ObjectStore

FORGET_EVENT = "governance.forget_user"
RECEIPTS_PREFIX = "governance/receipts/"  # one empty claim per receipt taken


def forget_receipt(key: str, request: int = 1) -> str:
    """The receipt of the user's ``request``-th erasure (1: the first; not the key itself)."""
    if request <= 1:
        return erasure_receipt(key)
    return hashlib.sha256(f"flywheel-forget:{key}:{request}".encode()).hexdigest()


def _taken(store: ObjectStore, catalog: Catalog) -> set[str]:
    """Every receipt an earlier request recorded anything under."""
    from pyiceberg.expressions import EqualTo

    from infra.catalog import scan

    taken: set[str] = set()
    for prefix in (RECEIPTS_PREFIX, ERASED_PREFIX, ERASURE_CASES_PREFIX):
        taken |= {k[len(prefix) : -len(".json")] for k in store.list(prefix) if k.endswith(".json")}
    events = scan(catalog, "audit_log", EqualTo("event_type", FORGET_EVENT))
    return taken | set(events.column("subject").to_pylist())


def request_receipts(store: ObjectStore, catalog: Catalog, key: str) -> tuple[str, list[str]]:
    """(this request's receipt, claimed for it alone; the receipts of the user's earlier
    requests, oldest first)."""
    taken = _taken(store, catalog)
    earlier: list[str] = []
    n = 1
    while True:
        receipt = forget_receipt(key, n)
        if receipt not in taken and _claim(store, receipt):
            return receipt, earlier
        earlier.append(receipt)
        n += 1


def _claim(store: ObjectStore, receipt: str) -> bool:
    """Create the receipt's claim; False when another request created it first."""
    try:
        store.put_if(f"{RECEIPTS_PREFIX}{receipt}.json", b"{}", etag=None)
    except PreconditionFailed:
        return False
    return True


@task(**IO_RETRIES)
def request_receipts_task(store: ObjectStore, catalog: Catalog, key: str) -> tuple[str, list[str]]:
    """Returns this request's receipt and those of the user's earlier requests."""
    return request_receipts(store, catalog, key)
