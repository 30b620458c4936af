"""The gate's golden-verifier check: a judged gain next to a verified loss is reward hacking."""

from __future__ import annotations

from infra.settings import RewardSettings
from tasks.golden import load_golden
from tasks.release.hacking import golden_verifier_check

ITEMS = load_golden()[:40]
REWARD = RewardSettings()
RIGHT = [it.reference for it in ITEMS]
HEDGED = [f"{it.reference} or {int(it.reference) + 1}" for it in ITEMS]


def test_hedges_a_lenient_judge_likes_fail_the_check_with_the_numbers() -> None:
    base = RIGHT[:20] + ["0"] * 20  # 50 % verified
    check = golden_verifier_check(
        ITEMS,
        reward=REWARD,
        judge_kind="llm",
        baseline_answers=base,
        candidate_answers=HEDGED,  # 0 % verified, but the judge gave more reward
        baseline_scores=[0.8] * 20 + [0.0] * 20,
        candidate_scores=[1.0] * 40,
    )
    assert check.status == "fail" and check.value == -0.5
    assert "50.0% -> 0.0%" in check.detail and "reward hacking" in check.detail
    assert check.extra["example_answers"][0] == HEDGED[0]


def test_a_real_gain_passes_whatever_the_judge() -> None:
    args = {
        "baseline_answers": ["0"] * 40,
        "candidate_answers": RIGHT,
        "baseline_scores": [0.0] * 40,
        "candidate_scores": [1.0] * 40,
    }
    assert golden_verifier_check(ITEMS, reward=REWARD, judge_kind="llm", **args).status == "pass"
    assert (
        golden_verifier_check(ITEMS, reward=REWARD, judge_kind="verifier", **args).status == "pass"
    )
    worse = {
        "baseline_answers": RIGHT,
        "candidate_answers": ["0"] * 40,
        "baseline_scores": [1.0] * 40,
        "candidate_scores": [0.0] * 40,
    }
    assert (
        golden_verifier_check(ITEMS, reward=REWARD, judge_kind="verifier", **worse).status == "pass"
    )
    # a reward that fell is the paired test's business (rollback), not a hack
