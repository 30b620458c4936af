"""The Langfuse eraser against a fake that behaves like the real server (issue 29, item 0): on
a v4 server in ``events_only`` mode (the deprecated lists answer 404) it finds a user's traces
through v2 observations, pages of at most 100, waits out a 429's ``Retry-After``, deletes in
batches within the server's limit (scores go with their traces), and reports a delete as
confirmed only once a read-back no longer finds the trace."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import zip_longest
from typing import Any

import pytest

from infra.errors import SourceRateLimited
from infra.privacy import user_key
from infra.traces.langfuse_eraser import LangfuseEraser
from infra.traces.langfuse_queue import LangfuseReviewQueue
from tests.fakes.langfuse import FakeLangfuseServer, FakeObservation, FakeScore, FakeTrace

pytestmark = pytest.mark.integration

SALT = "test-salt"
# four weeks ago, on the hour: the eraser's search for a user's traces looks back a year at
# most (SCAN_DAYS), so a fixed date would age out of it
START = (datetime.now(UTC) - timedelta(days=28)).replace(minute=0, second=0, microsecond=0)
V2 = "/api/public/v2/observations"
V1 = "/api/public/traces"


@pytest.fixture
def fake() -> Iterator[FakeLangfuseServer]:
    with FakeLangfuseServer(mode="events_only") as server:
        yield server


def eraser(fake: FakeLangfuseServer, **kw: Any) -> LangfuseEraser:
    keys = {"public_key": fake.public_key, "secret_key": fake.secret_key}
    return LangfuseEraser(host=fake.url, **keys, **kw)


def seed_users(fake: FakeLangfuseServer, users: dict[str, int]) -> dict[str, set[str]]:
    """``n`` one-generation traces per user, interleaved in time, each with a judge score."""
    rounds = zip_longest(*([u] * n for u, n in users.items()))
    order = [u for r in rounds for u in r if u]  # users interleaved in time
    out: dict[str, set[str]] = {u: set() for u in users}
    for i, user in enumerate(order):
        at, tid = START + timedelta(seconds=i), f"{user}-{i:05d}"
        gen = FakeObservation(id=f"{tid}-g", trace_id=tid, start_time=at, input="q", output="a")
        fake.add_trace(FakeTrace(id=tid, timestamp=at, observations=[gen], user_id=user))
        fake.add_score(FakeScore(f"{tid}-judge", tid, 0.5, at, name="judge"))
        out[user].add(tid)
    return out


def limits(fake: FakeLangfuseServer, path: str) -> list[int]:
    return [int(c["limit"][0]) for c in fake.calls(path) if "limit" in c]


def test_an_events_only_server_loses_every_trace_of_the_user(fake: FakeLangfuseServer) -> None:
    traces = seed_users(fake, {"alice": 230, "bob": 40})
    budget = fake.rate_limit("public-api", 3, window_s=1)  # 429s with Retry-After: 1

    with eraser(fake) as e:
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=set())

    assert set(done.requested) == traces["alice"] == set(done.confirmed)
    assert done.pending == [] and done.deferred == [] and done.api == "v2"
    assert set(fake.traces) == traces["bob"]
    assert {s.trace_id for s in fake.scores} == traces["bob"]  # scores went with their traces
    assert not [p for p, _ in fake.requests if "scores" in p]  # never listed nor deleted
    assert not fake.calls(V1)  # the deprecated list is never asked
    assert limits(fake, V2) and max(limits(fake, V2)) <= 100
    assert any(c.get("cursor") for c in fake.calls(V2))  # really paged
    assert budget.throttled > 0 and budget.ignored == 0  # every Retry-After waited out


def test_a_known_trace_names_the_user_without_scanning_everyone(fake: FakeLangfuseServer) -> None:
    traces = seed_users(fake, {"alice": 30, "bob": 300})
    known = {sorted(traces["alice"])[0], "never-in-langfuse"}

    with eraser(fake) as e:
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=known)

    # a known id is requested even where Langfuse holds nothing of it (a delete of an unknown
    # id is accepted); a read-back finds nothing of it: confirmed
    assert set(done.requested) == traces["alice"] | {"never-in-langfuse"} == set(done.confirmed)
    unfiltered = [c for c in fake.calls(V2) if not {"userId", "traceId"} & set(c)]
    assert [c["limit"] for c in unfiltered] == [["1"]]  # only the probe for the v2 API


def test_a_legacy_server_is_erased_through_the_v1_list(fake: FakeLangfuseServer) -> None:
    fake.mode = "legacy"  # a v3 server: no v2 observations
    traces = seed_users(fake, {"alice": 120, "bob": 30})

    with eraser(fake, page_size=500) as e:  # more than the server allows per page
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=set())

    assert set(done.requested) == traces["alice"] == set(done.confirmed)
    assert done.api == "v1" and set(fake.traces) == traces["bob"]
    assert limits(fake, V1) and max(limits(fake, V1)) == 100  # clamped, no 400


def test_queued_deletes_stay_pending_until_a_recheck_finds_them_gone(
    fake: FakeLangfuseServer,
) -> None:
    traces = seed_users(fake, {"alice": 12, "bob": 5})
    fake.deletes.visible_after_reads = None  # Langfuse's worker has not run yet

    with eraser(fake) as e:
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=set())
        assert set(done.requested) == traces["alice"] == set(done.pending)
        assert done.confirmed == []
        again = e.recheck(done.pending)  # the next run, before the worker: still there
        assert again.confirmed == [] and set(again.pending) == traces["alice"]
        fake.process_deletions()
        later = e.recheck(done.pending)

    assert set(later.confirmed) == traces["alice"] and later.requested == []
    assert set(fake.traces) == traces["bob"]


def test_a_spent_daily_delete_budget_defers_the_rest_and_says_when(
    fake: FakeLangfuseServer,
) -> None:
    traces = seed_users(fake, {"alice": 120})
    fake.rate_limit("trace-delete", 1, window_s=86_400)  # Langfuse Cloud: per day

    with eraser(fake, delete_batch=50) as e:
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=set())

    assert len(done.requested) == 50 and len(done.deferred) == 70
    assert set(done.requested) | set(done.deferred) == traces["alice"]
    assert done.retry_after_s is not None and done.retry_after_s > 3600
    assert len(fake.calls("DELETE /api/public/traces")) == 2  # one refused, not waited out


def test_deletes_go_in_batches_the_server_accepts(fake: FakeLangfuseServer) -> None:
    traces = seed_users(fake, {"alice": 1100})

    with eraser(fake) as e:
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=set())

    assert sorted(len(b) for b in fake.delete_batches) == [100, 1000]
    assert set(done.confirmed) == traces["alice"] and not fake.traces


def test_retention_expires_old_traces_on_an_events_only_server(fake: FakeLangfuseServer) -> None:
    traces = seed_users(fake, {"alice": 20, "bob": 20})
    cutoff = START + timedelta(seconds=25)
    old = {t for t in traces["alice"] | traces["bob"] if fake.traces[t].timestamp < cutoff}

    with eraser(fake) as e:
        done = e.expire(cutoff)

    assert set(done.requested) == old == set(done.confirmed) and len(old) == 25
    assert all(t.timestamp >= cutoff for t in fake.traces.values())


def test_the_review_queue_waits_out_a_rate_limit_and_never_posts_twice(
    fake: FakeLangfuseServer,
) -> None:
    from infra.errors import TransientSourceError

    qid = fake.add_annotation_queue("review")
    budget = fake.rate_limit("public-api", 2, window_s=1)
    keys = {"public_key": fake.public_key, "secret_key": fake.secret_key}
    with LangfuseReviewQueue(host=fake.url, queue_id=qid, page_size=2, **keys) as queue:
        assert queue.add_traces(["a", "b", "c"]) == 3
        assert budget.throttled > 0 and budget.ignored == 0
        fake.budgets.clear()
        fake.fail(f"/api/public/annotation-queues/{qid}/items", 1, skip=2)  # the POST fails
        with pytest.raises(TransientSourceError) as err:
            queue.add_traces(["d"])
    assert not isinstance(err.value, SourceRateLimited)
    assert [i["objectId"] for i in fake.queue_items] == ["a", "b", "c"]  # no retried POST
