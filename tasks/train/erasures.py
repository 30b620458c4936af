"""Training sets that stay reproducible after erasure.

``forget-user`` deletes the user's rows and expires every old snapshot, so time travel to the
snapshot a model trained on fails afterwards. Each erasure therefore writes a ledger entry
(``governance/erased/<receipt>.json``: sha256 of each erased trace id, never the id or the
key). :func:`reproduce_training_rows` reads the trained rows by time travel while the snapshot
exists, else from the current table, and accepts a missing row only when the ledger says it
was erased: the result is the trained set minus exactly the erased rows, and says which.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from infra.keys import ERASED_PREFIX

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

    from infra.store import ObjectStore
    from tasks.train.lineage import Lineage


def trace_digest(trace_id: str) -> str:
    """How the ledger names an erased trace id (never the id itself)."""
    return hashlib.sha256(f"flywheel-trace:{trace_id}".encode()).hexdigest()


def record_erasure(store: ObjectStore, *, receipt: str, trace_ids: set[str]) -> None:
    """Write the ledger entry of one erasure (hashes of the erased trace ids only)."""
    body = {
        "receipt": receipt,
        "at": datetime.now(UTC).isoformat(),
        "trace_id_sha256": sorted(trace_digest(t) for t in trace_ids),
    }
    store.put(f"{ERASED_PREFIX}{receipt}.json", json.dumps(body, sort_keys=True).encode())


def erased_digests(store: ObjectStore) -> set[str]:
    """Hashes of every trace id erased so far."""
    out: set[str] = set()
    for key in store.list(ERASED_PREFIX):
        out |= set(json.loads(store.get(key)).get("trace_id_sha256", []))
    return out


@dataclass(kw_only=True)
class Reproduced:
    """A version's training rows as they can be read now."""

    rows: pa.Table
    erased: list[str]  # trained trace ids erased since (forget-user)
    source: str  # "time-travel" | "current table"


def reproduce_training_rows(catalog: Catalog, store: ObjectStore, lineage: Lineage) -> Reproduced:
    """The rows a version trained on, minus exactly the rows erased since.

    Raises:
        ValueError: a trained row is missing and no erasure accounts for it.
    """
    from pyiceberg.expressions import In

    from infra.catalog import scan
    from tasks.train.lineage import training_rows

    ids = list(lineage.data.training_examples.trace_ids)
    try:
        return Reproduced(rows=training_rows(catalog, lineage), erased=[], source="time-travel")
    except ValueError:
        pass  # the snapshot was expired (erasure, retention) or rows were removed
    rows = scan(catalog, "training_examples", In("trace_id", ids)) if ids else None
    if rows is None:
        from infra.catalog import get_table

        rows = get_table(catalog, "training_examples").scan(limit=0).to_arrow()
    found = set(rows.column("trace_id").to_pylist())
    missing = sorted(set(ids) - found)
    erased = erased_digests(store)
    unexplained = [t for t in missing if trace_digest(t) not in erased]
    if unexplained:
        raise ValueError(
            f"{len(unexplained)} trained rows are missing and were not erased by forget-user"
        )
    return Reproduced(rows=rows, erased=missing, source="current table")
