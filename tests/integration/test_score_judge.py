"""The LLM judge against a real loopback OpenAI-compatible server (uvicorn + FastAPI in a
thread, answering in the OpenAI chat format): concurrency and throughput, failures and
retries, and ragas with the configured LLM."""

from __future__ import annotations

import time

import pytest

from infra.llm import ChatClient, judge_backoff
from infra.settings import JudgeSettings, Settings
from tasks.reward import ScoreItem, Scorer
from tests.fakes.judge_server import FakeJudgeServer

pytestmark = pytest.mark.integration

N, CONCURRENCY, DELAY_S = 320, 16, 0.2
IDEAL_S = N * DELAY_S / CONCURRENCY  # 4 s: every slot busy, zero overhead (printed only)


def _items(n: int = N) -> list[ScoreItem]:
    items = []
    for i in range(n):
        a, b = 10 + i % 90, 10 + i // 90
        answer = str(a + b) if i % 2 == 0 else str(a + b + 1)  # every second answer is wrong
        items.append(
            ScoreItem(
                question=f"What is {a}+{b}?",
                contexts=[f"calculator: {a} + {b} = {a + b}"],
                answer=answer,
                latency_s=1.0,
            )
        )
    return items


def _scorer(server: FakeJudgeServer, *, ragas_mode: str = "non_llm", **judge: object) -> Scorer:
    settings = Settings(
        judge=JudgeSettings(kind="llm", base_url=server.base_url, concurrency=CONCURRENCY, **judge)  # type: ignore[arg-type]
    )
    client = ChatClient.from_settings(
        settings.judge, retry=judge_backoff(settings.judge.max_retries, base_s=0.02)
    )
    return Scorer(settings, ragas_mode=ragas_mode, client=client)


def test_320_traces_are_judged_16_at_a_time() -> None:
    """Wall time is the benchmark's business (tests/benchmarks/bench_judge.py prints it as a
    ratio of the ideal); here: the concurrency limit is reached and never exceeded."""
    with FakeJudgeServer(delay_s=DELAY_S) as server:
        _scorer(server).score(_items(CONCURRENCY))  # warm up: imports, first connections
        server.max_inflight = 0
        scorer = _scorer(server)
        started = time.perf_counter()
        rewards = scorer.score(_items())
        elapsed = time.perf_counter() - started
    print(f"\n320 judge calls: {elapsed:.2f} s, {elapsed / IDEAL_S:.2f}x ideal ({IDEAL_S:.1f} s)")
    assert server.max_inflight == CONCURRENCY  # the limit is used, and never exceeded
    assert scorer.stats.llm_requests == N and scorer.stats.judge_failures == 0
    assert [r.judge for r in rewards] == [1.0 if i % 2 == 0 else 0.0 for i in range(N)]


def test_failing_judge_every_trace_still_scored_failures_retried_or_missing() -> None:
    items = _items(160)
    with FakeJudgeServer(delay_s=0.01, failure_rate=0.3, seed=7) as server:
        scorer = _scorer(server, max_retries=3)
        rewards = scorer.score(items)
        assert server.outcomes["error_500"] > 10 and server.outcomes["malformed"] > 10
        assert len(rewards) == len(items) and all(0.0 <= r.total <= 1.0 for r in rewards)
        missing = [r for r in rewards if r.judge is None]
        # no reference here, so context recall is missing everywhere (as in ragas)
        assert all(r.missing == ["judge", "context_recall"] for r in missing)
        assert len(missing) == scorer.stats.judge_failures < len(items) * 0.05
        assert scorer.stats.llm_retries > 0.2 * len(items)
        graded = [(i, r.judge) for i, r in enumerate(rewards) if r.judge is not None]
        assert all(judge == (1.0 if i % 2 == 0 else 0.0) for i, judge in graded)

        no_retry = _scorer(server, max_retries=0)
        rewards = no_retry.score(items)
        missing = sum(r.judge is None for r in rewards)
        assert len(rewards) == len(items) and 0.15 * len(items) < missing < 0.45 * len(items)
        assert missing == no_retry.stats.judge_failures


def test_ragas_with_the_configured_llm() -> None:
    items = _items(8)
    for item in items:
        item.reference = item.contexts[0].rsplit(" ", 1)[1]  # the right sum: recall needs one
    with FakeJudgeServer(delay_s=0.0) as server:
        scorer = _scorer(server, ragas_mode="llm")
        rewards = scorer.score(items)
    assert scorer.ragas_mode == "llm" and scorer.stats.ragas_failures == 0
    # faithfulness: ragas extracts statements, then asks for NLI verdicts (2 calls); recall 1
    assert server.requests == len(items) * 4
    assert [r.faithfulness for r in rewards] == [1.0 if i % 2 == 0 else 0.0 for i in range(8)]
    assert all(r.context_recall == 1.0 and r.missing == [] for r in rewards)
