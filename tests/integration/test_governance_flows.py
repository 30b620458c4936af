"""Governance through real Prefect runs: after forget-user no table scan, no object in the
store and no file under the warehouse holds the user's key, id or text, while other users'
data stays; retention removes raw data past its age and keeps the rest."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pyarrow.parquet as pq
import pytest

from infra.audit import record_event
from infra.catalog import SCHEMAS, append_rows, get_table, open_catalog, scan
from infra.keys import rollouts_key, scores_key
from infra.privacy import user_key
from infra.settings import get_settings
from infra.store import open_store
from infra.traces import FeedbackEvent, SpoolWriter
from tests.data.pii_corpus import _REWARD_COLS
from tests.helpers import make_trace

pytestmark = [pytest.mark.integration, pytest.mark.waits]  # mostly waits on the clock

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
TARGET, OTHER = "alice-zq", "bob-kx"
SECRET_TEXT = "zebraquartz"


def _plant(settings) -> None:
    """Spool -> collect -> scores -> curate (k=1), plus pairs, consent, an audit mention and a
    lineage file, so the user's data sits in every place a real loop puts it."""
    import pyarrow as pa

    from flows.collect import collect
    from flows.curate import curate
    from tasks.datasets import read_rollouts

    store = open_store(settings)
    writer = SpoolWriter(store, writer_id="test")
    for i in range(12):
        user = TARGET if i % 3 == 0 else OTHER
        text = (
            f"I'm a {SECRET_TEXT} fan, Alice Moreau. What is {i}+{i}?" if user == TARGET else None
        )
        trace = make_trace(i, T0, user_id=user, prompt_group=f"g-{i}")
        writer.write_trace(trace.model_copy(update={"question": text}) if text else trace)
    writer.write_feedback(FeedbackEvent(trace_id="trace-00000", value=1, at=T0, comment="ok"))
    writer.flush()
    collect(window_start=T0, hours=1)
    window = "2026-11-22T10:00:00Z"
    roll = read_rollouts(store, window)
    n = roll.num_rows
    cols = {"trace_id": roll["trace_id"], "prompt_group": roll["prompt_group"]}
    cols |= {c: [0.9] * n for c in _REWARD_COLS}
    cols |= {"missing": [[]] * n, "reward_config_hash": ["h"] * n, "window": [window] * n}
    sink = io.BytesIO()
    pq.write_table(pa.table(cols), sink)
    store.put(scores_key(window), sink.getvalue())
    curate(window_start=T0)
    curate(window_start=T0)  # a rerun: old snapshots now reference the user's rows twice

    catalog = open_catalog(settings)
    salt = settings.salt()
    target, other = user_key(TARGET, salt), user_key(OTHER, salt)
    pairs = [
        {"pair_id": f"p-{k[:6]}", "prompt": "q", "chosen": "a", "rejected": "b", "user_keys": [k]}
        for k in (target, other)
    ]
    append_rows(catalog, "preference_pairs", pairs)
    now = datetime.now(UTC)
    consent = [
        {"user_key": k, "consent_to_training": True, "updated_at": now} for k in (target, other)
    ]
    append_rows(catalog, "consent", consent)
    record_event(catalog, event_type="lineage.seen", actor="test", subject=target, details={})
    store.put("models/v1/lineage.json", json.dumps({"user_keys": [target, other]}).encode())


def _cells(rows: list[dict]) -> str:
    return json.dumps(rows, default=str)


def _object_text(key: str, data: bytes) -> str:
    if key.endswith(".parquet"):
        return _cells(pq.read_table(io.BytesIO(data)).to_pylist()) + data.decode("latin-1")
    return data.decode("latin-1")


def test_forget_user_leaves_no_trace(prefect_api, flywheel_home, monkeypatch):
    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")
    get_settings.cache_clear()
    settings = get_settings()
    _plant(settings)
    salt = settings.salt()
    target, other = user_key(TARGET, salt), user_key(OTHER, salt)
    store = open_store(settings)
    catalog = open_catalog(settings)
    curated = _cells(scan(catalog, "training_examples").to_pylist())
    assert target in curated and SECRET_TEXT in curated
    assert any(SECRET_TEXT in _object_text(k, store.get(k)) for k in store.list("traces/"))

    from flows.governance import forget_user_id

    result = forget_user_id(TARGET)
    assert result.rows_deleted["training_examples"] == 4
    assert result.rows_deleted["preference_pairs"] == 1 and result.rows_deleted["consent"] == 1
    assert result.orphan_files_removed > 0 and result.objects_rewritten >= 3

    needles = (target, TARGET, SECRET_TEXT)
    catalog = open_catalog(settings)
    for name in SCHEMAS:
        dump = _cells(scan(catalog, name).to_pylist())
        assert not any(n in dump for n in needles), f"{name} still mentions the user"
    for key in store.list():
        text = _object_text(key, store.get(key))
        assert not any(n in text for n in needles), f"{key} still holds the user's data"
    warehouse_files = [k for k in store.list("warehouse/")]
    assert any(k.endswith(".parquet") for k in warehouse_files)
    for key in warehouse_files:  # raw bytes too: parquet footers keep min/max statistics
        assert target[:16] not in store.get(key).decode("latin-1")

    for name in ("training_examples", "consent", "preference_pairs"):
        table = get_table(catalog, name)
        assert len(table.metadata.snapshots) == 1  # history that still held the rows is gone
    remaining = scan(catalog, "training_examples").to_pylist()
    assert len(remaining) == 8 and {r["user_key"] for r in remaining} == {other}
    assert other in store.get("models/v1/lineage.json").decode()
    events = scan(catalog, "audit_log").to_pylist()
    forget = [e for e in events if e["event_type"] == "governance.forget_user"]
    assert [e["subject"] for e in forget] == [result.receipt]


def test_forget_user_refuses_a_raw_id(prefect_api, flywheel_home):
    from flows.governance import forget_user

    with pytest.raises(ValueError, match="user key"):
        forget_user(user_key="alice@example.com")


def test_retention_deletes_only_expired_raw_data(prefect_api, flywheel_home):
    settings = get_settings()
    store = open_store(settings)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    old, new = now - timedelta(days=120), now - timedelta(days=2)
    for at in (old, new):
        writer = SpoolWriter(store, writer_id=f"w{at:%j}")
        writer.write_trace(make_trace(1, at))
        writer.flush()
        window = at.strftime("%Y-%m-%dT%H:00:00Z")
        store.put(rollouts_key(window), b"x")
        store.put(scores_key(window), b"x")
        store.put(f"curate/held/window={window}/held.parquet", b"x")
    store.put("models/v0/config.json", b"{}")
    catalog = open_catalog(settings)
    for i in range(3):
        append_rows(
            catalog,
            "consent",
            [{"user_key": f"k{i}", "consent_to_training": True, "updated_at": now}],
        )

    from flows.governance import retention

    result = retention()
    assert result.objects_deleted == 4
    left = store.list()
    assert not any(old.strftime("%Y-%m-%d") in k for k in left)
    assert sum(new.strftime("%Y-%m-%d") in k for k in left) == 4
    assert "models/v0/config.json" in left
    assert result.snapshots_expired == 0  # every snapshot is younger than the cutoff

    again = retention(days=0)
    assert again.snapshots_expired >= 2 and again.orphan_files_removed > 0
    assert len(get_table(open_catalog(settings), "consent").metadata.snapshots) == 1
    assert scan(open_catalog(settings), "consent").num_rows == 3
    events = [e["event_type"] for e in scan(open_catalog(settings), "audit_log").to_pylist()]
    assert events.count("governance.retention") == 2
