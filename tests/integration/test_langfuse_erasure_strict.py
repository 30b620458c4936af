"""Erasure in Langfuse, round two (issue 43, item 6), against a fake that refuses what the real
server refuses (read from langfuse/langfuse: ``DeleteTracesV1Body`` is zod-strict, time filters
are ``z.iso.datetime({offset: true})``, a query past ClickHouse's limits answers 422):

- every trace id flywheel knows for the user is deleted, observations or not, so a feedback
  score with a comment on a trace without observations goes too;
- a delete is confirmed only by a read that could have seen the trace: where the server
  answers 404 to both the v2 observations and the v1 trace, nothing is ever confirmed;
- no list scans the whole project."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from infra.privacy import user_key
from infra.traces.langfuse_eraser import LangfuseEraser
from tests.fakes.langfuse import FakeLangfuseServer, FakeObservation, FakeScore, FakeTrace

pytestmark = pytest.mark.integration

SALT = "test-salt"
NOW = datetime.now(UTC).replace(microsecond=0)
V2 = "/api/public/v2/observations"
COMMENT = "wrong again, call me on 010-2345-6789"


@pytest.fixture
def fake() -> Iterator[FakeLangfuseServer]:
    with FakeLangfuseServer(mode="events_only") as server:
        yield server


def http(fake: FakeLangfuseServer) -> httpx.Client:
    return httpx.Client(base_url=fake.url, auth=(fake.public_key, fake.secret_key))


def eraser(fake: FakeLangfuseServer, **kw: Any) -> LangfuseEraser:
    keys = {"public_key": fake.public_key, "secret_key": fake.secret_key}
    return LangfuseEraser(host=fake.url, **keys, **kw)


def seed(fake: FakeLangfuseServer) -> dict[str, str]:
    """alice: two traces with a generation, one without observations whose only content is
    her feedback score with a comment; bob: one trace. Returns name -> trace id."""
    ids = {"a1": "alice-1", "a2": "alice-2", "fb": "alice-feedback", "b1": "bob-1"}
    for n, (name, tid) in enumerate(ids.items()):
        at, user = NOW - timedelta(hours=n + 1), "bob" if name == "b1" else "alice"
        gen = [] if name == "fb" else [FakeObservation(id=f"{tid}-g", trace_id=tid, start_time=at)]
        fake.add_trace(FakeTrace(id=tid, timestamp=at, observations=gen, user_id=user))
    fake.add_score(FakeScore("fb-s", ids["fb"], 0.0, NOW, comment=COMMENT))
    fake.add_score(FakeScore("b1-s", ids["b1"], 1.0, NOW))
    return ids


# -- the fake refuses what the real server refuses ------------------------------------------


def test_a_delete_body_with_any_other_field_is_refused(fake: FakeLangfuseServer) -> None:
    ids = seed(fake)
    with http(fake) as client:
        extra = {"traceIds": [ids["a1"]], "projectId": "p"}
        refused = client.request("DELETE", "/api/public/traces", json=extra)
        assert refused.status_code == 400 and ids["a1"] in fake.traces
        accepted = client.request("DELETE", "/api/public/traces", json={"traceIds": [ids["a1"]]})
    assert accepted.status_code == 200 and ids["a1"] not in fake.traces


def test_time_filters_must_be_iso_8601_with_a_t_and_a_zone(fake: FakeLangfuseServer) -> None:
    since = (NOW - timedelta(days=1)).isoformat()  # ...T...+00:00
    with http(fake) as client:
        for bad in (since.replace("T", " "), since.replace("+00:00", "")):
            assert client.get(V2, params={"fromStartTime": bad}).status_code == 400, bad
        # an unencoded "+" reaches the server as a space
        assert client.get(f"{V2}?fromStartTime={since}").status_code == 400
        assert client.get(V2, params={"fromStartTime": since}).status_code == 200
        zulu = since.replace("+00:00", "Z")
        assert client.get(V2, params={"fromStartTime": zulu}).status_code == 200


def test_a_scan_of_the_whole_project_answers_422(fake: FakeLangfuseServer) -> None:
    seed(fake)
    since = (NOW - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    with http(fake) as client:
        whole = client.get(V2, params={"limit": 1, "fields": "core,basic"})
        assert whole.status_code == 422 and "narrow your request" in whole.json()["message"]
        assert client.get(V2, params={"toStartTime": since}).status_code == 422
        assert client.get(V2, params={"userId": "alice"}).status_code == 200
        assert client.get(V2, params={"fromStartTime": since}).status_code == 200
        fake.mode = "legacy"
        assert client.get("/api/public/traces").status_code == 422
        assert client.get("/api/public/traces", params={"fromTimestamp": since}).status_code == 200


def test_a_404_says_whether_the_trace_or_the_endpoint_is_missing(
    fake: FakeLangfuseServer,
) -> None:
    with http(fake) as client:
        off = client.get("/api/public/traces/nope")  # events_only: the endpoint is off
        fake.mode = "legacy"
        gone = client.get("/api/public/traces/nope")
    assert off.status_code == gone.status_code == 404
    assert "error" not in off.json() and gone.json()["error"] == "LangfuseNotFoundError"


# -- the eraser -------------------------------------------------------------------------------


def test_a_comment_on_a_trace_without_observations_is_deleted_and_confirmed_only_once_gone(
    fake: FakeLangfuseServer,
) -> None:
    ids = seed(fake)
    fake.deletes.visible_after_reads = None  # Langfuse's worker has not run yet
    known = {ids["a1"], ids["fb"]}  # what flywheel's tables name

    with eraser(fake) as e:
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=known)
        assert set(done.requested) == {ids["a1"], ids["a2"], ids["fb"]}
        assert ids["fb"] in done.pending  # its score is still there: not confirmed
        fake.process_deletions()
        later = e.recheck(done.pending)

    assert ids["fb"] in later.confirmed and later.pending == []
    assert [s.comment for s in fake.scores] == [None]  # bob's score is all that is left
    assert set(fake.traces) == {ids["b1"]}


def test_a_server_that_answers_404_to_both_reads_confirms_nothing(
    fake: FakeLangfuseServer,
) -> None:
    ids = seed(fake)
    fake.v2_observations_status = 404  # v4 events_only without the v2 read path
    known = {ids["a1"], ids["a2"], ids["fb"]}

    with eraser(fake) as e:
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=known)
        assert set(done.requested) == known  # deleted all the same
        assert done.confirmed == [] and set(done.pending) == known
        again = e.recheck(done.pending)  # the daily re-check: still cannot tell

    assert again.confirmed == [] and set(again.pending) == known
    assert not set(fake.traces) & known  # the deletes themselves went through


def test_finding_and_expiring_never_scan_the_whole_project(fake: FakeLangfuseServer) -> None:
    ids = seed(fake)

    with eraser(fake) as e:
        done = e.erase_user(key=user_key("alice", SALT), salt=SALT, known_trace_ids=set())
        assert set(done.requested) == {ids["a1"], ids["a2"]}  # found by a scan back in time
        expired = e.expire(NOW)

    assert set(expired.requested) == {ids["b1"]} == set(expired.confirmed)
    unnarrowed = [c for c in fake.calls(V2) if not {"userId", "traceId", "fromStartTime"} & set(c)]
    assert unnarrowed == []


def test_the_daily_recheck_on_such_a_server_confirms_nothing(fake: FakeLangfuseServer) -> None:
    ids = seed(fake)
    fake.v2_observations_status = 404
    pending = {ids["a1"], ids["fb"], "never-in-langfuse"}

    with eraser(fake) as e:
        again = e.recheck(pending)

    assert again.confirmed == [] and set(again.pending) == pending
