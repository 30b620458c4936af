"""A version's training set stays reproducible after forget-user, minus exactly the erased
rows, and says which were erased (issue 17); a row removed any other way is still an error."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pyiceberg.expressions import EqualTo

from infra.catalog import append_rows, current_snapshot_id, delete_rows, open_catalog
from infra.settings import get_settings
from infra.store import open_store
from tasks.train.erasures import reproduce_training_rows
from tests.integration.test_train_flow import _rows_for

pytestmark = pytest.mark.integration

W = "2026-03-02T09:00:00Z"


def _lineage(ids: list[str], snapshot: int | None) -> SimpleNamespace:
    te = SimpleNamespace(trace_ids=ids, snapshot_ids=[snapshot] if snapshot else [])
    return SimpleNamespace(data=SimpleNamespace(training_examples=te))


def test_training_rows_survive_forget_user_minus_the_erased(prefect_api, flywheel_home):
    settings = get_settings()
    catalog, store = open_catalog(settings), open_store(settings)
    rows = _rows_for({"alice": 2, "bob": 3}, W, settings.salt())
    append_rows(catalog, "training_examples", rows)
    ids = sorted(r["trace_id"] for r in rows)
    lineage = _lineage(ids, current_snapshot_id(catalog, "training_examples"))
    before = reproduce_training_rows(catalog, store, lineage)  # type: ignore[arg-type]
    assert before.source == "time-travel" and before.rows.num_rows == 10 and not before.erased

    from flows.governance import forget_user_id

    assert forget_user_id("alice").snapshots_expired > 0  # the trained snapshot is gone
    after = reproduce_training_rows(catalog, store, lineage)  # type: ignore[arg-type]
    alice = sorted(t for t in ids if t.startswith("alice"))
    assert after.source == "current table" and after.erased == alice
    assert sorted(after.rows.column("trace_id").to_pylist()) == sorted(set(ids) - set(alice))

    bob_row = next(t for t in ids if t.startswith("bob"))
    delete_rows(catalog, "training_examples", EqualTo("trace_id", bob_row))
    with pytest.raises(ValueError, match="not erased by forget-user"):
        reproduce_training_rows(catalog, store, lineage)  # type: ignore[arg-type]
