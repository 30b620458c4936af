"""Stage 1 through a real Prefect run: exact counts, quarantine reasons, idempotent reruns,
opted-out users dropped, on the local store and on a real S3 protocol server (moto)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from infra.catalog import append_rows, open_catalog, scan
from infra.privacy import user_key
from infra.settings import get_settings
from infra.store import open_store
from infra.traces import FeedbackEvent, SpoolWriter
from tests.helpers import make_trace
from tests.procs import s3_server

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
N_VALID = 40


def _malformed(settings) -> list[bytes]:
    good = make_trace(999, T0).model_dump(mode="json")
    missing = {k: v for k, v in good.items() if k not in ("answer", "model_version")}
    wrong = {**good, "latency_s": "slow", "error_count": "many"}
    huge = {**good, "trace_id": "huge", "answer": "x" * 5_000_000}
    return [
        b'{"trace_id": "t", "question": "Hi I am Jane (jane@example.com)',  # bad JSON
        json.dumps(missing).encode(),
        json.dumps(wrong).encode(),
        json.dumps(huge).encode(),
        b'{"trace_id": "\xff\xfe", "answer": "4"}',  # invalid UTF-8
    ]


def _fill_spool(settings) -> int:
    store = open_store(settings)
    writer = SpoolWriter(store, writer_id="test")
    for i in range(N_VALID):
        writer.write_trace(make_trace(i, T0))
    writer.write_feedback(FeedbackEvent(trace_id="trace-00003", value=1, at=T0))
    writer.flush()
    bad = _malformed(settings)  # a foreign writer's object, bytes as they came
    store.put("traces/dt=2026-11-22/hour=10/foreign-000001.jsonl", b"\n".join(bad) + b"\n")
    return len(bad)


def _run_collect() -> object:
    from flows.collect import collect

    return collect(window_start=T0, hours=1)


def _assert_window(settings, n_rows: int, n_quarantined: int) -> None:
    from tasks.datasets import read_rollouts

    table = read_rollouts(open_store(settings), "2026-11-22T10:00:00Z")
    assert table.num_rows == n_rows
    assert len(set(table.column("trace_id").to_pylist())) == n_rows
    q = scan(open_catalog(settings), "quarantine")
    assert q.num_rows == n_quarantined
    reasons = " ".join(q.column("reason").to_pylist()) + " ".join(q.column("record").to_pylist())
    assert "@example.com" not in reasons and "Jane" not in reasons
    assert "too large" in reasons and "invalid UTF-8" in reasons and "bad JSON" in reasons


def test_collect_counts_quarantine_and_rerun(prefect_api, flywheel_home) -> None:
    settings = get_settings()
    m = _fill_spool(settings)
    result = _run_collect()
    assert (result.written, result.quarantined) == (N_VALID, m)
    _assert_window(settings, N_VALID, m)
    again = _run_collect()
    assert (again.written, again.quarantined) == (N_VALID, m)
    _assert_window(settings, N_VALID, m)
    from tasks.datasets import read_rollouts

    rows = read_rollouts(open_store(settings), result.window).to_pylist()
    assert {r["trace_id"]: r["feedback"] for r in rows}["trace-00003"] == 1
    assert all(r["user_key"] == user_key(r["user_id"], settings.salt()) for r in rows)


def test_opted_out_users_are_dropped_and_counted(prefect_api, flywheel_home) -> None:
    settings = get_settings()
    _fill_spool(settings)
    opted = user_key("user-3", settings.salt())
    now = datetime.now(UTC)
    append_rows(
        open_catalog(settings),
        "consent",
        [
            {"user_key": opted, "consent_to_training": True, "updated_at": now.replace(year=2025)},
            {"user_key": opted, "consent_to_training": False, "updated_at": now},
        ],
    )
    result = _run_collect()
    expected_out = sum(1 for i in range(N_VALID) if i % 11 == 3)
    assert result.opted_out == expected_out
    assert result.written == N_VALID - expected_out
    state = json.loads(open_store(settings).get("metrics/collect.json"))
    series = state["counters"]["flywheel_stage_records_total"]
    assert any("dropped_opted_out" in k and v == expected_out for k, v in series.items())


def test_collect_on_s3_server(prefect_api, flywheel_home, monkeypatch) -> None:
    with s3_server("flywheel-test") as endpoint:
        for key, value in {
            "FLYWHEEL_STORE_URL": "s3://flywheel-test/prefix",
            "FLYWHEEL_S3_ENDPOINT_URL": endpoint,
            "FLYWHEEL_S3_ACCESS_KEY_ID": "testing",
            "FLYWHEEL_S3_SECRET_ACCESS_KEY": "testing",
        }.items():
            monkeypatch.setenv(key, value)
        get_settings.cache_clear()
        settings = get_settings()
        m = _fill_spool(settings)
        _run_collect()
        _run_collect()
        _assert_window(settings, N_VALID, m)
        keys = open_store(settings).list("")
        assert "rollouts/window=2026-11-22T10:00:00Z/batch.parquet" in keys
        assert any(k.startswith("warehouse/") for k in keys)  # Iceberg data lives in the bucket
        assert not (flywheel_home / "store").exists()


def test_traces_naming_a_workload_that_is_not_configured_are_the_shared_releases(
    prefect_api, flywheel_home
) -> None:
    """Old spool lines (or a source's tags) naming ``../x`` or ``gone`` are collected as the
    shared release's ``default`` and counted; a configured workload keeps its name."""
    from tasks.datasets import read_rollouts

    settings = get_settings()
    writer = SpoolWriter(open_store(settings), writer_id="old")
    names = ["../x", "gone", "clock", "default"]
    for i, name in enumerate(names):
        writer.write_trace(make_trace(i, T0, workload=name))
    writer.flush()

    result = _run_collect()

    rows = read_rollouts(open_store(settings), result.window).to_pylist()
    assert [r["workload"] for r in sorted(rows, key=lambda r: r["trace_id"])] == [
        "default",
        "default",
        "clock",
        "default",
    ]
    assert (result.written, result.unconfigured_workload) == (4, 2)
    state = json.loads(open_store(settings).get("metrics/collect.json"))
    series = state["counters"]["flywheel_stage_records_total"]
    assert any("unconfigured_workload" in k and v == 2 for k, v in series.items())
