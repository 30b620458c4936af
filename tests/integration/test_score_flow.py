"""Stage 2 through a real Prefect run: scores per window, identical on rerun with no judge
calls, metrics and artifact, a window without rollouts, and the LLM judge over HTTP."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from infra.settings import get_settings
from infra.store import open_store
from infra.traces import FeedbackEvent, SpoolWriter
from tests.fakes.judge_server import FakeJudgeServer
from tests.helpers import make_trace

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
WINDOW = "2026-11-22T10:00:00Z"
N = 30
COLUMNS = [
    "trace_id",
    "prompt_group",
    "reward",
    "reward_judge",
    "reward_faithfulness",
    "reward_context_recall",
    "reward_feedback",
    "reward_latency",
    "missing",
    "reward_config_hash",
    "judge_kind",
    "ragas_mode",
    "window",
]


def _collect_window() -> None:
    """N traces (every third answer wrong, two slow, feedback on two) collected for T0."""
    from flows.collect import collect

    writer = SpoolWriter(open_store(get_settings()), writer_id="test")
    for i in range(N):
        extra: dict[str, object] = {}
        if i % 3 == 1:
            extra["answer"] = str(i % 50 + i % 40 + 1)
        if i in (4, 5):
            extra["latency_s"] = 20.0
        writer.write_trace(make_trace(i, T0, **extra))
    writer.write_feedback(FeedbackEvent(trace_id="trace-00000", value=1, at=T0))
    writer.write_feedback(FeedbackEvent(trace_id="trace-00001", value=-1, at=T0))
    writer.flush()
    assert collect(window_start=T0, hours=1).written == N


def _score():  # type: ignore[no-untyped-def]
    from flows.score import score

    return score(window_start=T0, hours=1)


def _rows() -> dict[str, dict]:
    from tasks.datasets import read_scores

    table = read_scores(open_store(get_settings()), WINDOW)
    assert set(COLUMNS) <= set(table.column_names)
    return {r["trace_id"]: r for r in table.to_pylist()}


def test_score_window_rerun_identical_without_judge_calls(prefect_api, flywheel_home) -> None:
    _collect_window()
    first = _score()
    assert first.status == "scored" and first.traces == N
    assert first.stats["judge_calls"] > 0 and first.judge_kind == "verifier"
    assert first.ragas_mode == "non_llm"
    rows = _rows()
    assert len(rows) == N
    right = [r["reward"] for t, r in rows.items() if int(t[-5:]) % 3 != 1]
    wrong = [r["reward"] for t, r in rows.items() if int(t[-5:]) % 3 == 1]
    assert min(right) > max(wrong)
    assert rows["trace-00000"]["reward_feedback"] == 1.0
    assert rows["trace-00001"]["reward_feedback"] == 0.0
    assert rows["trace-00004"]["reward_latency"] == pytest.approx(0.5)
    assert all(r["missing"] == [] and r["window"] == WINDOW for r in rows.values())

    second = _score()
    assert second.stats["judge_calls"] == 0 and second.stats["cache_hits"] == N
    assert _rows() == rows
    assert second.reward_config_hash == first.reward_config_hash

    state = json.loads(open_store(get_settings()).get("metrics/score.json"))
    hist = state["histograms"]["flywheel_reward"]
    assert {json.loads(k)[0][1] for k in hist} >= {"total", "judge", "feedback", "latency"}
    calls = state["counters"]["flywheel_judge_calls_total"]
    assert sum(calls.values()) == first.stats["judge_calls"]
    assert _artifact_markdown().count("| judge |") == 1


def _artifact_markdown() -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["score-summary"])),
        )
    assert artifacts
    return str(max(artifacts, key=lambda a: a.created).data)


def test_window_without_rollouts_is_a_clear_result(prefect_api, flywheel_home) -> None:
    result = _score()
    assert result.status == "no_rollouts" and result.traces == 0
    assert result.message == f"no rollouts for window {WINDOW}"
    assert not open_store(get_settings()).exists(f"scores/window={WINDOW}/scores.parquet")


def test_llm_judge_flow_caches_across_runs(prefect_api, flywheel_home, monkeypatch) -> None:
    with FakeJudgeServer(delay_s=0.01) as server:
        monkeypatch.setenv("FLYWHEEL_JUDGE__KIND", "llm")
        monkeypatch.setenv("FLYWHEEL_JUDGE__BASE_URL", server.base_url)
        # judge every trace (by default the LLM judge is skipped where users gave feedback)
        monkeypatch.setenv("FLYWHEEL_JUDGE__SKIP_WHEN_FEEDBACK", "false")
        get_settings.cache_clear()
        _collect_window()
        first = _score()
        requests = server.requests
        assert first.judge_kind == "llm" and first.ragas_mode == "llm"
        assert requests == first.stats["llm_requests"] > 0
        rows = _rows()
        second = _score()
        assert server.requests == requests and second.stats["judge_calls"] == 0
        assert _rows() == rows
    judged = [r["reward_judge"] for r in rows.values()]
    assert all(j is not None for j in judged)
    assert sum(j == 0.0 for j in judged) == sum(1 for i in range(N) if i % 3 == 1)
