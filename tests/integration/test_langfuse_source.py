"""The Langfuse source against a loopback server speaking Langfuse's public API (SDK unpatched)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from infra.errors import ConfigError, SourceError, TransientSourceError
from infra.settings import LangfuseSettings, Settings
from infra.traces import WindowBatch
from infra.traces.langfuse_reader import LangfuseSource, Reading
from tests.fakes.langfuse import FakeLangfuseServer, FakeObservation, FakeScore, FakeTrace

pytestmark = [pytest.mark.integration, pytest.mark.waits]  # mostly waits on the clock

START = datetime(2025, 3, 4, 10, tzinfo=UTC)
END = START + timedelta(hours=1)
V2 = "/api/public/v2/observations"


@pytest.fixture
def fake() -> Iterator[FakeLangfuseServer]:
    with FakeLangfuseServer() as server:
        yield server


def source(fake: FakeLangfuseServer, **kw: object) -> LangfuseSource:
    args: dict = {
        "host": fake.url,
        "public_key": fake.public_key,
        "secret_key": fake.secret_key,
        "page_size": 10,
        "backoff_s": 0.01,
        **kw,
    }
    return LangfuseSource(**args)


def test_traces_across_pages_arrive_exactly_once_with_feedback(fake: FakeLangfuseServer) -> None:
    seeded = fake.seed(45, start=START + timedelta(seconds=30), spacing=timedelta(seconds=70))
    fake.add_score(
        FakeScore(
            id="late",
            trace_id="t-00000",
            value=-1,  # user changed their mind
            timestamp=START + timedelta(hours=3),
        )
    )
    with source(fake) as src:
        batch = src.read_window(START, END)

    assert batch.invalid == []
    ids = [r.trace_id for r in batch.records]
    assert sorted(ids) == [t.id for t in seeded] and len(set(ids)) == len(ids)
    cursors = [c.get("cursor") for c in fake.calls(V2)]
    assert len(cursors) >= 5 and len(set(map(str, cursors))) == len(cursors)  # really paged

    rec = {r.trace_id: r for r in batch.records}
    assert rec["t-00000"].feedback == -1  # the latest score wins
    assert [rec[f"t-{i:05d}"].feedback for i in (1, 2, 3, 5)] == [-1, 0, None, -1]
    first = rec["t-00001"]
    assert first.question == "What is 12 x 8?" and first.answer == "96"
    assert first.contexts == ["calculator(12*8) = 96"]
    assert (first.prompt_group, first.model_version, first.route) == ("pg-0", "v0", "stable")
    assert (first.temperature, first.top_p, first.tokens_in, first.tokens_out) == (0.7, 0.95, 21, 3)
    assert (first.user_id, first.session_id) == ("user-1", "s-1")
    assert first.latency_s == pytest.approx(0.251)
    # every 5th trace is agent SPAN -> GENERATION + TOOL; the tool call and its error are kept
    agent = rec["t-00009"]
    assert agent.answer == str(20 * 16) and agent.tool_calls[0]["name"] == "calculator"
    assert agent.error_count == 1 and rec["t-00004"].error_count == 0


def test_a_page_failing_twice_still_yields_every_trace(fake: FakeLangfuseServer) -> None:
    seeded = fake.seed(30, start=START, spacing=timedelta(seconds=100))
    fake.fail(V2, times=2, status=500, skip=1)  # the second page fails twice
    fake.fail("/api/public/v3/scores", times=1, status=503)
    with source(fake) as src:
        batch = src.read_window(START, END)

    assert sorted(r.trace_id for r in batch.records) == [t.id for t in seeded]
    assert sum(r.feedback is not None for r in batch.records) == 23
    second_page = fake.calls(V2)[1].get("cursor")
    assert second_page is not None
    assert [c.get("cursor") for c in fake.calls(V2)].count(second_page) == 3


def test_a_page_that_keeps_failing_raises_a_retriable_error(fake: FakeLangfuseServer) -> None:
    fake.seed(30, start=START, spacing=timedelta(seconds=100))
    fake.fail(V2, times=100, status=502, skip=1)
    with source(fake, page_retries=2) as src, pytest.raises(TransientSourceError, match="502"):
        src.read_window(START, END)
    assert len(fake.calls(V2)) == 1 + 3  # one good page, then the failing one 3 times


@pytest.mark.parametrize("status", [404, 501])
def test_v2_disabled_falls_back_to_v1_with_the_same_records(
    fake: FakeLangfuseServer, status: int
) -> None:
    fake.seed(25, start=START, spacing=timedelta(seconds=140))
    with source(fake) as src:
        via_v2 = src.read_window(START, END)
        fake.v2_observations_status = status
        fake.v3_scores_status = status
        fake.fail("/api/public/traces", times=1, status=500, skip=1)
        via_v1 = src.read_window(START, END)

    assert len(via_v2.records) == 25 and fake.calls("/api/public/traces")
    assert fake.calls("/api/public/v2/scores")
    assert by_id(via_v1) == by_id(via_v2)


def by_id(batch: WindowBatch) -> dict[str, dict]:
    return {r.trace_id: r.model_dump() for r in batch.records}


def test_malformed_traces_are_reported_without_their_values(fake: FakeLangfuseServer) -> None:
    fake.seed(5, start=START, spacing=timedelta(minutes=1))
    secret = "jane.doe@example.com"
    at = START + timedelta(minutes=20)
    bad = {
        "no-output": FakeObservation(
            id="o1",
            trace_id="no-output",
            start_time=at,
            input=[{"role": "user", "content": secret}],
            output=None,
            metadata={"model_version": "v0"},
        ),
        "bad-temp": FakeObservation(
            id="o2",
            trace_id="bad-temp",
            start_time=at,
            end_time=at + timedelta(seconds=1),
            input=secret,
            output=secret,
            model_parameters={"temperature": secret},
            metadata={"model_version": "v0"},
        ),
        "huge": FakeObservation(
            id="o3",
            trace_id="huge",
            start_time=at,
            end_time=at + timedelta(seconds=1),
            input="q",
            output="x" * 50_000,
            metadata={"model_version": "v0"},
        ),
    }
    for tid, obs in bad.items():
        fake.add_trace(FakeTrace(id=tid, timestamp=at, observations=[obs], user_id=secret))
    with source(fake, reading=Reading(max_record_bytes=20_000)) as src:
        batch = src.read_window(START, END)

    assert len(batch.records) == 5
    reasons = {line.source.rsplit("/", 1)[1]: reason for line, reason in batch.invalid}
    assert set(reasons) == set(bad)
    assert "no answer" in reasons["no-output"]
    assert "temperature" in reasons["bad-temp"]
    assert "too large" in reasons["huge"]
    assert all(secret not in r and "jane" not in r for r in reasons.values())


def test_window_bounds_are_respected(fake: FakeLangfuseServer) -> None:
    ms = timedelta(milliseconds=1)
    for name, at in {"before": START - ms, "first": START, "last": END - ms, "after": END}.items():
        fake.add_trace(
            FakeTrace(
                id=name,
                timestamp=at,
                observations=[
                    FakeObservation(
                        id=f"{name}-g",
                        trace_id=name,
                        start_time=at,
                        end_time=at + ms,
                        input="q",
                        output="a",
                        metadata={"model_version": "v0"},
                    )
                ],
            )
        )
    with source(fake) as src:
        via_v2 = src.read_window(START, END)
        fake.v2_observations_status = 404
        via_v1 = src.read_window(START, END)

    assert sorted(r.trace_id for r in via_v2.records) == ["first", "last"]
    assert sorted(r.trace_id for r in via_v1.records) == ["first", "last"]
    sent = fake.calls(V2)[0]
    assert sent["fromStartTime"] == ["2025-03-04T10:00:00Z"]
    assert sent["toStartTime"] == ["2025-03-04T11:00:00Z"]
    # feedback is read from the window start up to the lookahead after its end
    assert fake.calls("/api/public/v3/scores")[0]["toTimestamp"] == ["2025-03-05T11:00:00Z"]


def test_wrong_keys_fail_clearly_and_are_not_retried(fake: FakeLangfuseServer) -> None:
    with source(fake, secret_key="sk-wrong") as src, pytest.raises(SourceError) as err:
        src.read_window(START, END)
    assert not isinstance(err.value, TransientSourceError)
    assert "sk-wrong" not in str(err.value) and "401" in str(err.value)
    assert len(fake.calls(V2)) == 1


def test_a_server_without_either_read_api_fails_clearly(fake: FakeLangfuseServer) -> None:
    fake.v2_observations_status = fake.v1_traces_status = 404
    with source(fake) as src, pytest.raises(SourceError, match="404.*v1 traces") as err:
        src.read_window(START, END)
    assert not isinstance(err.value, TransientSourceError)


def test_from_settings_needs_keys(
    fake: FakeLangfuseServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("FLYWHEEL_LANGFUSE__PUBLIC_KEY", "FLYWHEEL_LANGFUSE__SECRET_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="FLYWHEEL_LANGFUSE__PUBLIC_KEY"):
        LangfuseSource.from_settings(Settings(_env_file=None))  # type: ignore[call-arg]
    keys = LangfuseSettings(
        host=fake.url, public_key=SecretStr("pk-lf-test"), secret_key=SecretStr("sk-lf-test")
    )
    settings = Settings(langfuse=keys)
    fake.seed(3, start=START, spacing=timedelta(minutes=5))
    with LangfuseSource.from_settings(settings) as src:
        assert len(src.read_window(START, END).records) == 3


def test_an_events_only_server_is_read_through_v2_within_its_rate_limit() -> None:
    with FakeLangfuseServer(mode="events_only") as fake:  # a v4 server's default
        seeded = fake.seed(150, start=START, spacing=timedelta(seconds=20))
        # one read per 3 s window: 429 with Retry-After even when a loaded machine makes
        # each read take about a second (a 1 s window then never filled: no 429 to honour)
        budget = fake.rate_limit("public-api", 1, window_s=3)
        with source(fake, page_size=500) as src:
            batch = src.read_window(START, END)

    assert sorted(r.trace_id for r in batch.records) == [t.id for t in seeded]
    assert sum(r.feedback is not None for r in batch.records) == 113
    assert not fake.calls("/api/public/traces") and not fake.calls("/api/public/v2/scores")
    assert budget.throttled > 0 and budget.ignored == 0  # every Retry-After waited out
    assert max(int(c["limit"][0]) for c in fake.calls("/api/public/v3/scores")) == 100
