"""Erasure in Langfuse, round three (issue 52, item 6), against the fake that speaks the real
protocol: a listed item with a null ``traceId`` is never deleted as the trace ``"None"``; a
trace delete, which spends Langfuse's daily ``trace-delete`` budget, is retried only after a
429 (nothing was done) and otherwise deferred to the next run; retention expires a score on a
trace that has no observation (which no observation list finds)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from infra.privacy import user_key
from infra.traces.langfuse_eraser import LangfuseEraser
from tests.fakes.langfuse import FakeLangfuseServer, FakeObservation, FakeScore, FakeTrace

pytestmark = pytest.mark.integration

SALT = "test-salt"
NOW = datetime.now(UTC).replace(microsecond=0)
OLD = NOW - timedelta(days=40)
CUTOFF = NOW - timedelta(days=30)
DELETE = "DELETE /api/public/traces"


@pytest.fixture
def fake() -> Iterator[FakeLangfuseServer]:
    with FakeLangfuseServer(mode="events_only") as server:
        yield server


def eraser(fake: FakeLangfuseServer, **kw: Any) -> LangfuseEraser:
    keys = {"public_key": fake.public_key, "secret_key": fake.secret_key}
    return LangfuseEraser(host=fake.url, backoff_s=0.01, **keys, **kw)


def trace(fake: FakeLangfuseServer, tid: str, at: datetime, user: str = "alice") -> None:
    gen = FakeObservation(id=f"{tid}-g", trace_id=tid, start_time=at, input="q", output="a")
    fake.add_trace(FakeTrace(id=tid, timestamp=at, observations=[gen], user_id=user))


def deleted_ids(fake: FakeLangfuseServer) -> list[str]:
    return [t for call in fake.calls(DELETE) for t in call.get("traceIds", [])]


def test_an_observation_with_a_null_trace_id_is_never_deleted_as_none(
    fake: FakeLangfuseServer,
) -> None:
    trace(fake, "alice-1", OLD)
    stray = FakeObservation(id="stray-span", trace_id=None, start_time=OLD, type="SPAN")
    fake.add_trace(FakeTrace(id="stray", timestamp=OLD, observations=[stray]))

    with eraser(fake) as e:
        done = e.expire(CUTOFF)

    assert done.requested == ["alice-1"] == done.confirmed
    assert "None" not in deleted_ids(fake)


def test_a_failed_trace_delete_is_deferred_not_retried(fake: FakeLangfuseServer) -> None:
    for i in range(3):
        trace(fake, f"alice-{i}", NOW - timedelta(hours=i + 1))
    fake.fail("/api/public/traces", 1, status=503)  # the delete may have been carried out

    with eraser(fake) as e:
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=set())

    assert len(fake.calls(DELETE)) == 1  # one request of the daily budget spent, not five
    assert done.requested == [] and sorted(done.deferred) == ["alice-0", "alice-1", "alice-2"]
    with eraser(fake) as e:  # the next retention run requests them again
        again = e.recheck(done.deferred)
    assert sorted(again.confirmed) == ["alice-0", "alice-1", "alice-2"] and not fake.traces


def test_a_trace_delete_answered_429_is_retried_after_the_wait(fake: FakeLangfuseServer) -> None:
    for i in range(4):
        trace(fake, f"alice-{i}", NOW - timedelta(hours=i + 1))
    budget = fake.rate_limit("trace-delete", 1, window_s=1)  # per second: waited out

    with eraser(fake, delete_batch=2) as e:
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=set())

    assert budget.throttled == 1 and len(fake.calls(DELETE)) == 3  # the 429 once, then again
    assert len(done.requested) == 4 and done.deferred == [] and not fake.traces


def test_retention_expires_a_score_on_a_trace_without_observations(
    fake: FakeLangfuseServer,
) -> None:
    # alice's feedback with a comment on a trace whose observations are gone: only the score
    fake.add_trace(FakeTrace(id="alice-fb", timestamp=OLD, observations=[], user_id="alice"))
    fake.add_score(FakeScore("fb-s", "alice-fb", 0.0, OLD, comment="call me on 010-2345-6789"))
    trace(fake, "bob-1", NOW - timedelta(days=1), user="bob")  # recent: its old score stays
    fake.add_score(FakeScore("bob-s", "bob-1", 1.0, OLD))
    fake.add_score(FakeScore("session-s", None, 1.0, OLD, session_id="s-1"))  # names no trace

    with eraser(fake) as e:
        done = e.expire(CUTOFF)

    assert done.requested == ["alice-fb"] == done.confirmed
    assert sorted(s.id for s in fake.scores) == ["bob-s", "session-s"]
    assert "None" not in deleted_ids(fake) and set(fake.traces) == {"bob-1"}
