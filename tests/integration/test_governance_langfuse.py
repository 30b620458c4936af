"""Erasure and retention reach Langfuse (issue 17): ``forget-user`` deletes the user's traces
(their scores go with them) in the (fake) Langfuse through the public API's batch delete and
the audit log says so, with how many deletes a read-back confirmed; ``retention`` deletes
traces past their age; other users' traces stay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from infra.catalog import open_catalog, scan
from infra.settings import get_settings
from tests.fakes.langfuse import FakeLangfuseServer, FakeScore

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def langfuse(flywheel_home, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLangfuseServer]:
    with FakeLangfuseServer() as fake:
        monkeypatch.setenv("FLYWHEEL_TRACE_SOURCE", "langfuse")
        monkeypatch.setenv("FLYWHEEL_LANGFUSE__HOST", fake.url)
        monkeypatch.setenv("FLYWHEEL_LANGFUSE__PUBLIC_KEY", fake.public_key)
        monkeypatch.setenv("FLYWHEEL_LANGFUSE__SECRET_KEY", fake.secret_key)
        monkeypatch.setenv("FLYWHEEL_LANGFUSE__PAGE_SIZE", "7")  # several pages
        get_settings.cache_clear()
        yield fake
    get_settings.cache_clear()


def _seed(fake: FakeLangfuseServer, start: datetime, prefix: str) -> dict[str, str]:
    traces = fake.seed(20, start=start, spacing=timedelta(minutes=1), prefix=prefix)
    users = {}
    for i, trace in enumerate(traces):
        trace.user_id = "alice" if i % 4 == 0 else "bob"
        users[trace.id] = trace.user_id
        fake.add_score(FakeScore(f"{trace.id}-judge", trace.id, 0.8, start, name="judge"))
    return users


def test_forget_user_deletes_their_langfuse_traces_and_audits_it(prefect_api, langfuse) -> None:
    users = _seed(langfuse, NOW - timedelta(hours=2), "t")
    alice = {t for t, u in users.items() if u == "alice"}
    from flows.governance import forget_user_id

    result = forget_user_id("alice")
    assert result.found and result.langfuse_traces_deleted == len(alice) == 5
    assert result.langfuse_traces_confirmed == 5 and result.langfuse_recheck == []
    assert set(langfuse.deleted_traces) == alice
    assert all(u == "bob" for u in (t.user_id for t in langfuse.traces.values()))
    assert len(langfuse.traces) == 15
    assert not [s for s in langfuse.scores if s.trace_id in alice]
    assert any(s.trace_id not in alice for s in langfuse.scores)  # bob's scores stay
    assert langfuse.calls("DELETE /api/public/traces")  # the batch endpoint
    assert not [p for p, _ in langfuse.requests if "scores" in p]  # scores go with the traces

    events = scan(open_catalog(get_settings()), "audit_log").to_pylist()
    [event] = [e for e in events if e["event_type"] == "governance.langfuse_erasure"]
    details = json.loads(event["details"])
    assert details == {
        "store": "langfuse",
        "traces_deleted": 5,
        "traces_confirmed": 5,
        "traces_pending": 0,
        "traces_deferred": 0,
    }
    assert event["subject"] == result.receipt and "alice" not in event["details"]
    [forget] = [e for e in events if e["event_type"] == "governance.forget_user"]
    assert json.loads(forget["details"])["langfuse_traces_deleted"] == 5
    from deployments.erasure_commands import langfuse_line
    from infra.store import open_store
    from tasks.governance.reach import load_case

    case = load_case(open_store(get_settings()), result.receipt)  # flywheel erasure-status
    assert langfuse_line(case.stores["langfuse"]) == "requested 5 / confirmed 5"


def test_a_spent_delete_budget_still_finds_the_user_and_a_recheck_finishes(
    prefect_api, langfuse
) -> None:
    users = _seed(langfuse, NOW - timedelta(hours=2), "t")
    alice = {t for t, u in users.items() if u == "alice"}
    langfuse.rate_limit("trace-delete", 0, window_s=86_400)  # the day's budget is spent
    from flows.governance import forget_user_id
    from tasks.governance.langfuse import langfuse_recheck

    result = forget_user_id("alice")
    assert result.found and result.langfuse_traces_deferred == 5
    assert result.langfuse_traces_deleted == 0 and set(result.langfuse_recheck) == alice
    assert len(langfuse.traces) == 20

    langfuse.budgets.clear()  # the next day
    later = langfuse_recheck(get_settings(), set(result.langfuse_recheck))
    assert set(later.confirmed) == alice and later.pending == [] and len(langfuse.traces) == 15


def test_forget_user_falls_back_to_single_deletes(prefect_api, langfuse) -> None:
    langfuse.batch_delete_status = 404  # an older server without the batch endpoint
    _seed(langfuse, NOW - timedelta(hours=2), "t")
    from flows.governance import forget_user_id

    assert forget_user_id("alice").langfuse_traces_deleted == 5
    assert len(langfuse.traces) == 15


def test_retention_deletes_langfuse_traces_past_their_age(prefect_api, langfuse) -> None:
    old = _seed(langfuse, NOW - timedelta(days=40), "old")
    _seed(langfuse, NOW - timedelta(hours=1), "new")
    from flows.governance import retention

    result = retention(days=30)
    assert result.langfuse_traces_deleted == len(old) == 20
    assert set(langfuse.deleted_traces) == set(old)
    assert all(t.startswith("new") for t in langfuse.traces)
