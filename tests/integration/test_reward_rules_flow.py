"""Issue 16 through real Prefect runs of collect, score and curate: a window scored while the
judge endpoint is down becomes no training data (and curate says why, naming the judge); a
thumbs-down given hours after its trace removes it from training_examples on the next run."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta

import pytest

from infra.catalog import open_catalog, scan
from infra.settings import get_settings
from infra.store import open_store
from infra.traces import FeedbackEvent, SpoolWriter
from tests.helpers import make_trace

pytestmark = [pytest.mark.integration, pytest.mark.waits]  # mostly waits on the clock

N = 12


def _closed_port() -> int:
    """A loopback port nothing listens on (the judge endpoint is down)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write(start: datetime, n: int = N) -> None:
    writer = SpoolWriter(open_store(get_settings()), writer_id="test")
    for i in range(n):
        writer.write_trace(make_trace(i, start))
    writer.flush()


def _hourly(start: datetime):  # type: ignore[no-untyped-def]
    from flows.collect import collect
    from flows.curate import curate
    from flows.score import score

    return collect(window_start=start), score(window_start=start), curate(window_start=start)


def _table_ids() -> set[str]:
    rows = scan(open_catalog(get_settings()), "training_examples").to_pylist()
    return {r["trace_id"] for r in rows}


def test_judge_down_no_feedback_window_is_not_training_data(
    prefect_api, flywheel_home, monkeypatch
) -> None:
    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")
    monkeypatch.setenv("FLYWHEEL_JUDGE__KIND", "llm")
    monkeypatch.setenv("FLYWHEEL_JUDGE__BASE_URL", f"http://127.0.0.1:{_closed_port()}/v1")
    monkeypatch.setenv("FLYWHEEL_JUDGE__MAX_RETRIES", "0")
    monkeypatch.setenv("FLYWHEEL_JUDGE__RAGAS_MODE", "non_llm")  # faithfulness still scores
    get_settings.cache_clear()
    start = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    _write(start)
    collected, scored, curated = _hourly(start)
    assert collected.written == N and scored.traces == N
    from tasks.datasets import read_scores

    scores = read_scores(open_store(get_settings()), scored.windows[0]).to_pylist()
    # re-weighting alone would have passed every trace (faithful, fast, neutral feedback)
    assert all(r["reward"] >= get_settings().curate.min_reward for r in scores)
    assert all(r["reward_judge"] is None and r["eligible"] is False for r in scores)
    reason = "required judge|feedback: judge llm:judge:rubric/v1 failed, no user feedback"
    assert scored.ineligible == {reason: N} and reason in scored.message
    assert curated.written == 0 and _table_ids() == set()
    assert curated.dropped == {"reward_incomplete": N}
    assert curated.ineligible == {reason: N}
    from tasks.curate.summary import summary_markdown

    assert f"| {reason} | {N} |" in summary_markdown(curated)


def test_late_thumbs_down_removes_the_trace_on_the_next_run(
    prefect_api, flywheel_home, monkeypatch
) -> None:
    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")
    get_settings.cache_clear()
    now = datetime.now(UTC)
    hour = now.replace(minute=0, second=0, microsecond=0)
    first, later = hour - timedelta(hours=3), hour - timedelta(hours=1)
    _write(first)
    _, scored, curated = _hourly(first)
    assert curated.train == N and "trace-00004" in _table_ids()
    window = scored.windows[0]

    # three hours later the user gives trace-00004 a thumbs-down
    writer = SpoolWriter(open_store(get_settings()), writer_id="feedback")
    writer.write_feedback(FeedbackEvent(trace_id="trace-00004", value=-1, at=datetime.now(UTC)))
    writer.flush()
    collected, rescored, recurated = _hourly(later)  # the next hourly run, another window
    assert collected.feedback_changed == {window: 1}
    assert window in rescored.windows and recurated.recurated == [window]
    from tasks.datasets import read_scores

    rows = {r["trace_id"]: r for r in read_scores(open_store(get_settings()), window).to_pylist()}
    assert rows["trace-00004"]["reward"] == 0.0 and rows["trace-00004"]["reward_feedback"] == 0.0
    assert rows["trace-00005"]["reward"] == pytest.approx(0.9)  # no feedback: neutral 0.5
    assert _table_ids() == {f"trace-{i:05d}" for i in range(N)} - {"trace-00004"}

    # idempotent: the same feedback read again changes nothing and redoes nothing
    again, rescored_again, recurated_again = _hourly(later)
    assert again.feedback_changed == {} and window not in rescored_again.windows
    assert recurated_again.recurated == []
    assert _table_ids() == {f"trace-{i:05d}" for i in range(N)} - {"trace-00004"}


@pytest.mark.parametrize("allowed", [True, False])
def test_context_recall_reference_from_the_llm_judge_or_not_applicable(allowed: bool) -> None:
    from infra.settings import JudgeSettings, Settings
    from tasks.reward import ScoreItem, Scorer
    from tests.fakes.judge_server import FakeJudgeServer

    with FakeJudgeServer(delay_s=0.0) as server:
        judge = JudgeSettings(
            kind="llm",
            base_url=server.base_url,
            ragas_mode="non_llm",
            reference_from_llm=allowed,
        )
        scorer = Scorer(Settings(judge=judge))
        item = ScoreItem(
            question="What is 12+30?", contexts=["calculator: 12 + 30 = 42"], answer="42"
        )
        (b,) = scorer.score([item])
    assert b.judge == 1.0
    if allowed:
        assert b.context_recall == 1.0 and scorer.stats.references_from_llm == 1
    else:  # never silently missing: reported as not applicable
        assert b.context_recall is None and b.not_applicable == ["context_recall"]
        assert b.as_row()["not_applicable"] == ["context_recall"]
