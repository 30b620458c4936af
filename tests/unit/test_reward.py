"""The composite reward: components, re-normalisation, the configuration hash, the verifier
on the golden set, non-LLM ragas equivalents, caching, and the LLM client's retries (through
httpx's mock transport; the real-server tests are in tests/integration/test_score_judge.py)."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from infra.errors import JudgeError
from infra.llm import ChatClient, judge_backoff
from infra.settings import JudgeSettings, RewardSettings, Settings
from tasks.reward import (
    ComponentCache,
    LLMJudge,
    Rubric,
    ScoreItem,
    Scorer,
    combine,
    feedback_component,
    latency_component,
    reward_config_hash,
    rubric_score,
    score_answer,
    score_batch,
    support,
)

CTX = ["calculator: 23 + 58 = 81"]


def _settings(**judge: object) -> Settings:
    return Settings(judge=JudgeSettings(**judge))  # type: ignore[arg-type]


def test_feedback_and_latency_components() -> None:
    assert [feedback_component(v) for v in (1, 0, -1, None)] == [1.0, 0.5, 0.0, 0.5]
    assert feedback_component(None, "missing") is None
    assert latency_component(3.0, ok_s=10, max_s=30) == 1.0
    assert latency_component(20.0, ok_s=10, max_s=30) == pytest.approx(0.5)
    assert latency_component(45.0, ok_s=10, max_s=30) == 0.0
    assert latency_component(None, ok_s=10, max_s=30) is None


def test_missing_components_renormalise_and_total_is_clamped() -> None:
    r = RewardSettings()
    full = combine(
        {"judge": 1, "faithfulness": 1, "context_recall": 1, "feedback": 1, "latency": 1}, r
    )
    assert full.total == pytest.approx(1.0) and full.missing == []
    partial = combine({"judge": 0.0, "faithfulness": None, "feedback": 1.0, "latency": 1.0}, r)
    assert partial.missing == ["faithfulness", "context_recall"]
    assert partial.total == pytest.approx((0.2 + 0.05) / (0.3 + 0.2 + 0.05))
    assert combine({"judge": 7.0, "latency": math.nan}, r).total == 1.0
    assert combine({}, r).total == 0.0


def test_latency_penalty_is_worth_at_most_the_latency_weight() -> None:
    base = {"judge": 1.0, "faithfulness": 1.0, "context_recall": 1.0, "feedback": 1.0}
    fast = combine({**base, "latency": latency_component(1.0, ok_s=10, max_s=30)}, RewardSettings())
    slow = combine(
        {**base, "latency": latency_component(60.0, ok_s=10, max_s=30)}, RewardSettings()
    )
    assert fast.total - slow.total == pytest.approx(0.05)


def test_config_hash_tracks_what_the_reward_depends_on() -> None:
    base = reward_config_hash(Settings())
    assert base == reward_config_hash(Settings())
    assert base != reward_config_hash(Settings(reward=RewardSettings(w_judge=0.5)))
    assert base != reward_config_hash(Settings(reward=RewardSettings(latency_ok_s=5)))
    llm_a = reward_config_hash(_settings(kind="llm", base_url="http://x/v1", model="a"))
    llm_b = reward_config_hash(_settings(kind="llm", base_url="http://x/v1", model="b"))
    assert len({base, llm_a, llm_b}) == 3
    assert base != reward_config_hash(Settings(), ragas_mode="llm")


def test_verifier_scores_golden_references_far_above_corrupted_answers() -> None:
    from tasks.golden import load_golden

    golden = load_golden()[:200]
    right = [
        ScoreItem(question=g.question, contexts=g.contexts, answer=g.reference) for g in golden
    ]
    wrong = []
    for i, g in enumerate(golden):
        bad = [str(int(g.reference) + 1), str(int(g.reference) - 10), "I don't know", ""][i % 4]
        wrong.append(ScoreItem(question=g.question, contexts=g.contexts, answer=bad))
    good, bad = score_batch(right, settings=Settings()), score_batch(wrong, settings=Settings())
    mean_good = sum(b.total for b in good) / len(good)
    mean_bad = sum(b.total for b in bad) / len(bad)
    assert all(b.judge == 1.0 and b.faithfulness == 1.0 for b in good)
    assert all(b.judge == 0.0 for b in bad)
    assert mean_good > 0.85 and mean_good - mean_bad > 0.4


def test_non_llm_faithfulness_and_recall() -> None:
    assert support("81", CTX) == 1.0
    assert support("The answer is 82.", CTX) == 0.0
    assert support("Paris is the capital", ["Paris is the capital of France"]) == 1.0
    assert support("?!", CTX) is None
    b = score_answer(
        ScoreItem(question="What is 23+58?", contexts=CTX, answer="81"), settings=Settings()
    )
    assert (b.faithfulness, b.context_recall) == (1.0, 1.0)
    no_ctx = score_answer(
        ScoreItem(question="Hi there", contexts=[], answer="Hello", latency_s=1.0),
        settings=Settings(),
    )
    assert set(no_ctx.missing) == {"judge", "faithfulness", "context_recall"}
    assert Scorer(Settings()).ragas_mode == "non_llm"


class CountingJudge:
    kind, costly, config_id = "counting", True, "counting:v1"

    def __init__(self, fail: bool = False) -> None:
        self.calls, self.fail = 0, fail

    async def judge(self, *, question, contexts, answer, reference):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.fail:
            raise JudgeError("endpoint down")
        return 1.0 if answer == "81" else 0.0

    def reference_for(self, question: str, contexts: list[str]) -> str | None:
        return "81"


def test_cache_and_repeats_make_no_judge_calls_and_identical_scores() -> None:
    items = [
        ScoreItem(question="What is 23+58?", contexts=CTX, answer=a, latency_s=1.0)
        for a in ("81", "82", "81")
    ]
    judge, cache = CountingJudge(), ComponentCache()
    first = Scorer(Settings(), judge=judge).score(items, cache)
    assert judge.calls == 2  # the repeated answer is judged once
    again = Scorer(Settings(), judge=judge)
    assert again.score(items, cache) == first
    assert judge.calls == 2 and again.stats.cache_hits == 3 and again.stats.judge_calls == 0


def test_judge_failure_marks_the_component_missing_and_is_not_cached() -> None:
    judge, cache = CountingJudge(fail=True), ComponentCache()
    scorer = Scorer(Settings(), judge=judge)
    [b] = scorer.score(
        [ScoreItem(question="What is 23+58?", contexts=CTX, answer="81", latency_s=1.0)], cache
    )
    assert b.judge is None and b.missing == ["judge"]
    assert b.total == pytest.approx((0.25 + 0.2 + 0.1 + 0.05) / 0.7)
    assert scorer.stats.judge_failures == 1
    judge.fail = False  # the next run retries the failed component
    [b2] = Scorer(Settings(), judge=judge).score(
        [ScoreItem(question="What is 23+58?", contexts=CTX, answer="81")], cache
    )
    assert b2.judge == 1.0 and judge.calls == 2


def test_skip_when_feedback_skips_costly_judges_and_counts() -> None:
    judge = CountingJudge()
    scorer = Scorer(_settings(skip_when_feedback=True), judge=judge)
    items = [
        ScoreItem(question="What is 23+58?", contexts=CTX, answer="81", feedback=1),
        ScoreItem(question="Q", contexts=CTX, answer="81"),
    ]
    with_fb, without = scorer.score(items)
    assert with_fb.judge is None and with_fb.feedback == 1.0 and without.judge == 1.0
    assert judge.calls == 1 and scorer.stats.judge_skipped == 1


def test_rubric_accuracy_gates_style() -> None:
    assert (
        rubric_score(Rubric(accuracy=False, completeness=True, clarity=True, conciseness=True)) == 0
    )
    assert (
        rubric_score(Rubric(accuracy=True, completeness=True, clarity=True, conciseness=True)) == 1
    )
    with pytest.raises(ValueError):
        Rubric.model_validate(
            {"accuracy": "yes", "completeness": 1, "clarity": 1, "conciseness": 1}
        )


def _client(replies: list[tuple[int, str]], **kw: object) -> tuple[ChatClient, list[int]]:
    seen: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        status, content = replies[min(len(seen), len(replies) - 1)]
        seen.append(status)
        body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
        return httpx.Response(status, json=body if status == 200 else {"error": "x"})

    params: dict = {"base_url": "http://judge.test/v1", "model": "m"}
    params.update(kw)
    retry = judge_backoff(max_retries=params.pop("max_retries", 3), base_s=0.001)
    return ChatClient(transport=httpx.MockTransport(handler), retry=retry, **params), seen


GOOD = json.dumps({"accuracy": True, "completeness": True, "clarity": False, "conciseness": True})


def _judge(client: ChatClient) -> float | None:
    from tasks.reward import run_sync

    return run_sync(
        LLMJudge(client).judge(question="What is 23+58?", contexts=CTX, answer="81", reference=None)
    )


def test_llm_client_retries_5xx_and_malformed_then_succeeds() -> None:
    client, seen = _client(
        [(500, ""), (200, "not json"), (200, '{"accuracy": "yes"}'), (200, f"```json\n{GOOD}\n```")]
    )
    assert _judge(client) == pytest.approx(0.9)
    assert seen == [500, 200, 200, 200]
    assert (client.stats.retries, client.stats.malformed, client.stats.server_errors) == (3, 2, 1)


def test_llm_client_gives_up_after_retries_and_on_4xx_and_budget() -> None:
    client, seen = _client([(503, "")], max_retries=2)
    with pytest.raises(JudgeError, match="after 3 attempts"):
        _judge(client)
    assert len(seen) == 3
    client, seen = _client([(401, "")])
    with pytest.raises(JudgeError, match="HTTP 401"):
        _judge(client)
    assert len(seen) == 1  # a refused request is not retried
    client, seen = _client([(200, GOOD)], call_budget=1)
    assert _judge(client) == pytest.approx(0.9)
    with pytest.raises(JudgeError, match="budget"):
        _judge(client)
    assert len(seen) == 1 and client.stats.budget_exhausted == 1


def test_reward_config_hash_value_is_stable() -> None:
    """Stored scores carry this hash: a change must be deliberate (it re-keys every score)."""
    assert reward_config_hash(Settings()) == "5eb54b1aa5dda17f"


def test_reward_package_imports_no_stage_module() -> None:
    """tasks/reward is shared by score, gate and shadow: it must not import any of them."""
    import ast
    from pathlib import Path

    import tasks.reward

    for path in Path(tasks.reward.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                assert not name.startswith(("flows", "tasks.score", "tasks.gate")), (path, name)
                assert not name.startswith(("tasks.rollout", "infra.gateway")), (path, name)
