"""Langfuse deletes stay *requested* until a read-back confirms them, and the daily retention run
re-checks them (issue 29, item 0): Langfuse queues deletes, so ``forget-user`` leaves some
unconfirmed; ``flywheel erasure-status`` says so; each ``flywheel retention`` reads them back
(requesting again those still there) until every one is confirmed, and then nothing is left
pending. The trace ids are kept under ``governance/`` only, never in the audit log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from infra.catalog import open_catalog, scan
from infra.keys import LANGFUSE_PENDING_PREFIX
from infra.routing import RoutingState
from infra.settings import LangfuseSettings, Settings, get_settings
from infra.store import LocalStore, open_store
from tests.fakes.langfuse import FakeLangfuseServer

pytestmark = pytest.mark.integration
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def langfuse(flywheel_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLangfuseServer]:
    """A v4 fake Langfuse (events_only) as the trace source; its worker runs only when told."""
    with FakeLangfuseServer(mode="events_only") as fake:
        fake.deletes.visible_after_reads = None  # deletes wait for process_deletions()
        monkeypatch.setenv("FLYWHEEL_TRACE_SOURCE", "langfuse")
        monkeypatch.setenv("FLYWHEEL_LANGFUSE__HOST", fake.url)
        monkeypatch.setenv("FLYWHEEL_LANGFUSE__PUBLIC_KEY", fake.public_key)
        monkeypatch.setenv("FLYWHEEL_LANGFUSE__SECRET_KEY", fake.secret_key)
        get_settings.cache_clear()
        yield fake
    get_settings.cache_clear()


def seed(fake: FakeLangfuseServer) -> set[str]:
    """12 recent traces, every third one alice's (the rest bob's); alice's trace ids."""
    traces = fake.seed(12, start=NOW - timedelta(hours=3), spacing=timedelta(minutes=5))
    for i, trace in enumerate(traces):
        trace.user_id = "alice" if i % 3 == 0 else "bob"
    return {t.id for t in traces if t.user_id == "alice"}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """Run ``flywheel ARGV --json`` in this process; its JSON summary."""
    from deployments.cli import main

    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    return dict(json.loads(lines[-1]))


def test_retention_confirms_the_deletes_forget_user_left_pending(
    prefect_api: None, langfuse: FakeLangfuseServer, capsys: pytest.CaptureFixture[str]
) -> None:
    alice = seed(langfuse)
    store = open_store(get_settings())

    out = cli(capsys, "forget-user", "alice")
    receipt = out["receipt"]
    assert out["langfuse_traces_deleted"] == 4 and out["langfuse_traces_pending"] == 4
    assert out["langfuse_traces_confirmed"] == 0  # queued: Langfuse's worker has not run
    status = cli(capsys, "erasure-status", receipt)
    assert status["langfuse"] == "requested 4 / confirmed 0 (read-back pending)"
    [kept] = store.list(LANGFUSE_PENDING_PREFIX)
    assert receipt in kept and set(json.loads(store.get(kept))["trace_ids"]) == alice
    assert b"alice" not in store.get(kept)

    first = cli(capsys, "retention", "--days", "30")  # the worker still has not run
    assert first["langfuse_rechecked_erasures"] == 1
    assert (first["langfuse_recheck_confirmed"], first["langfuse_recheck_pending"]) == (0, 4)
    assert cli(capsys, "erasure-status", receipt)["langfuse"].startswith(
        "requested 4 / confirmed 0"
    )

    langfuse.process_deletions()  # Langfuse's worker deleted them
    second = cli(capsys, "retention", "--days", "30")
    assert second["langfuse_rechecked_erasures"] == 1
    assert (second["langfuse_recheck_confirmed"], second["langfuse_recheck_pending"]) == (4, 0)

    status = cli(capsys, "erasure-status", receipt)
    assert status["langfuse"] == "requested 4 / confirmed 4"
    assert status["stores"]["langfuse"] == {"requested": 4, "confirmed": 4}
    assert [s["detail"] for s in status["steps"] if s["step"] == "confirmed"] == [
        "4 of 4 deletes read back"
    ]
    assert store.list(LANGFUSE_PENDING_PREFIX) == []  # nothing pending any more
    assert not alice & set(langfuse.traces) and len(langfuse.traces) == 8

    events = sorted(scan(open_catalog(get_settings()), "audit_log").to_pylist(), key=_at)
    runs = [json.loads(e["details"]) for e in events if e["event_type"] == "governance.retention"]
    assert [r["langfuse_recheck_confirmed"] for r in runs] == [0, 4]
    assert not [e for e in events if any(t in e["details"] for t in alice)]  # ids: governance/


def _at(event: dict[str, Any]) -> Any:
    return event["at"]


def test_a_server_no_read_reaches_keeps_every_delete_pending(
    prefect_api: None, langfuse: FakeLangfuseServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43, item 6: a v4 server without the v2 read path answers 404 to the v2
    observations and to the v1 trace alike; forget-user still deletes every trace flywheel
    knows (a feedback comment on a trace without observations included) and never calls one
    confirmed, and the daily re-check keeps them pending."""
    from infra.traces import SpoolWriter
    from tests.fakes.langfuse import FakeScore, FakeTrace
    from tests.helpers import make_trace

    alice = seed(langfuse)
    feedback = "alice-feedback"  # nothing but her score and its comment
    langfuse.add_trace(FakeTrace(id=feedback, timestamp=NOW, observations=[], user_id="alice"))
    langfuse.add_score(FakeScore("fb", feedback, 0.0, NOW, comment="call me on 010-2345-6789"))
    langfuse.v2_observations_status = 404
    store = open_store(get_settings())
    writer = SpoolWriter(store, writer_id="test")  # the traces flywheel's raw spool holds
    for i, tid in enumerate(sorted({*alice, feedback})):
        writer.write_trace(make_trace(i, NOW, user_id="alice", trace_id=tid))
    writer.flush()

    out = cli(capsys, "forget-user", "alice")
    assert out["langfuse_traces_deleted"] == 5 == out["langfuse_traces_pending"]
    assert out["langfuse_traces_confirmed"] == 0
    langfuse.process_deletions()  # gone, but no read on this server can tell
    assert not [s for s in langfuse.scores if s.trace_id == feedback]
    from tasks.governance.langfuse_pending import recheck_receipt

    assert recheck_receipt(get_settings(), store, out["receipt"]) == (0, 5)  # the daily re-check
    status = cli(capsys, "erasure-status", out["receipt"])
    assert status["langfuse"] == "requested 5 / confirmed 0 (read-back pending)"


def test_a_recheck_keeps_what_is_still_there_and_needs_no_case(tmp_path: Path) -> None:
    from tasks.governance.langfuse_pending import (
        load_pending,
        pending_receipts,
        recheck_receipt,
        save_pending,
    )
    from tasks.governance.reach import load_case, new_case, save_case

    store = LocalStore(tmp_path / "store")
    with FakeLangfuseServer(mode="events_only") as fake:
        fake.deletes.visible_after_reads = None
        ids = sorted(t.id for t in fake.seed(3, start=NOW, spacing=timedelta(minutes=1)))
        gone = "t-already-gone"  # its delete took effect before the re-check
        keys = {"public_key": fake.public_key, "secret_key": fake.secret_key}
        settings = Settings(langfuse=LangfuseSettings(host=fake.url, **keys))
        with_case, without = "ab" * 32, "cd" * 32
        stores = {"langfuse": {"requested": 5, "confirmed": 1}}
        save_case(
            store,
            new_case(
                receipt=with_case,
                reached={},
                state=RoutingState(),
                bake_s=0,
                deadline_days=7,
                stores=stores,
            ),
        )
        save_pending(store, with_case, requested=5, trace_ids=[*ids, gone])
        save_pending(store, without, requested=1, trace_ids=[ids[0]])
        assert pending_receipts(store) == [with_case, without]

        assert recheck_receipt(settings, store, with_case) == (1, 3)
        assert load_case(store, with_case).stores["langfuse"]["confirmed"] == 2
        assert (kept := load_pending(store, with_case)) and kept.trace_ids == ids
        assert kept.rechecked_at is not None

        fake.process_deletions()
        assert recheck_receipt(settings, store, with_case) == (3, 0)
        assert load_case(store, with_case).stores["langfuse"] == {"requested": 5, "confirmed": 5}
        assert recheck_receipt(settings, store, without) == (1, 0)  # no case: still re-checked
        assert pending_receipts(store) == []
        assert recheck_receipt(settings, store, with_case) == (0, 0)  # nothing left to do

        save_pending(store, with_case, requested=2, trace_ids=["t-x"])
        save_pending(store, with_case, requested=2, trace_ids=[])  # a rerun confirmed all
        assert pending_receipts(store) == []
