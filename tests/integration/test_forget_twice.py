"""A second ``forget-user`` for the same person (issue 43, item 6): they came back and asked
again. It gets its own receipt and never overwrites the first request's records: the first
erasure's pending model replacement, its deadline and its steps survive, its reproducible
training set (``governance/erased/<receipt>.json``) still reproduces, and
``flywheel erasure-status`` answers for both receipts."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from infra.catalog import append_rows, current_snapshot_id, open_catalog
from infra.routing import RoutingState, save_state
from infra.settings import get_settings
from infra.store import open_store
from infra.traces import SpoolWriter
from tasks.governance.reach import load_case
from tasks.train.erasures import reproduce_training_rows
from tests.helpers import make_trace
from tests.integration.test_train_flow import _rows_for

pytestmark = pytest.mark.integration

W = "2026-03-02T09:00:00Z"
LATER = datetime(2026, 3, 20, 10, tzinfo=UTC)


def _publish_v1(store, catalog, rows: list[dict]) -> SimpleNamespace:
    """v1 trained on ``rows`` (its lineage.json, as train writes it) and serves as stable."""
    ids = sorted(r["trace_id"] for r in rows)
    sid = current_snapshot_id(catalog, "training_examples")
    data = {
        "training_examples": {"snapshot_ids": [sid], "trace_ids": ids},
        "user_keys": sorted({r["user_key"] for r in rows}),
    }
    body = json.dumps({"data": data}).encode()
    store.put("models/v1/lineage.json", body)
    files = {"lineage.json": hashlib.sha256(body).hexdigest()}
    store.put("models/v1/_COMPLETE", json.dumps({"version": "v1", "files": files}).encode())
    save_state(store, RoutingState(stable="v1"))
    te = SimpleNamespace(trace_ids=ids, snapshot_ids=[sid])
    return SimpleNamespace(data=SimpleNamespace(training_examples=te))


def _status(receipt: str, capsys: pytest.CaptureFixture[str]) -> str:
    from deployments import cli

    assert cli.main(["erasure-status", receipt]) == 0
    return capsys.readouterr().out


def test_a_second_forget_user_keeps_the_first_erasure_intact(
    prefect_api, flywheel_home, capsys: pytest.CaptureFixture[str]
) -> None:
    from flows.governance import forget_user_id

    settings = get_settings()
    catalog, store = open_catalog(settings), open_store(settings)
    rows = _rows_for({"alice": 2, "bob": 2}, W, settings.salt())
    append_rows(catalog, "training_examples", rows)
    lineage = _publish_v1(store, catalog, rows)
    alice = sorted(r["trace_id"] for r in rows if r["trace_id"].startswith("alice"))

    first = forget_user_id("alice")
    case = load_case(store, first.receipt)
    assert case.status == "pending" and list(case.versions) == ["v1"]

    # alice comes back, chats again (a raw trace in the spool) and asks again
    writer = SpoolWriter(store, writer_id="test")
    writer.write_trace(make_trace(7, LATER, user_id="alice", trace_id="alice-again"))
    writer.flush()
    second = forget_user_id("alice")

    assert second.found and second.receipt != first.receipt  # one receipt per request
    kept = load_case(store, first.receipt)
    assert kept.status == "pending" and list(kept.versions) == ["v1"]  # replacement not lost
    assert kept.requested_at == case.requested_at and kept.deadline_at == case.deadline_at
    assert [s.step for s in kept.steps[: len(case.steps)]] == [s.step for s in case.steps]
    again = reproduce_training_rows(catalog, store, lineage)  # type: ignore[arg-type]
    assert again.erased == alice  # the first erasure's training set still reproduces
    assert sorted(again.rows.column("trace_id").to_pylist()) == sorted(
        r["trace_id"] for r in rows if r["trace_id"].startswith("bob")
    )

    first_text, second_text = _status(first.receipt, capsys), _status(second.receipt, capsys)
    assert first.receipt in first_text and "pending" in first_text and "v1" in first_text
    assert second.receipt in second_text
    assert first.receipt[:16] in second_text  # the later request names the earlier one
