"""The gate's golden-verifier check: a judged gain next to a verified loss is reward hacking, and
so is a proven verified regression the judged reward did not show."""

from __future__ import annotations

from typing import Any

from infra.settings import RewardSettings
from tasks.golden import load_golden
from tasks.release.gate.drift import Check
from tasks.release.gate.hacking import golden_verifier_check
from tasks.release.stats import PairedTest, paired_test

ITEMS = load_golden()[:40]
REWARD = RewardSettings()
RIGHT = [it.reference for it in ITEMS]
HEDGED = [f"{it.reference} or {int(it.reference) + 1}" for it in ITEMS]


def judged(baseline: list[float], candidate: list[float]) -> PairedTest:
    """The gate's paired test of the judged rewards, as it hands it to the check."""
    return paired_test(baseline, candidate, n_bootstrap=200)


def llm_check(base: list[str], cand: list[str], test: PairedTest, **kw: Any) -> Check:
    """The check as the gate runs it with an LLM judge on ``ITEMS``."""
    return golden_verifier_check(
        ITEMS,
        reward=REWARD,
        judge_kind="llm",
        baseline_answers=base,
        candidate_answers=cand,
        judged=test,
        **kw,
    )


def test_hedges_a_lenient_judge_likes_fail_the_check_with_the_numbers() -> None:
    base = RIGHT[:20] + ["0"] * 20  # 50 % verified
    # HEDGED: 0 % verified, but the judge gave more reward
    check = llm_check(base, HEDGED, judged([0.8] * 20 + [0.0] * 20, [1.0] * 40))
    assert check.status == "fail" and check.value == -0.5
    assert "50.0% -> 0.0%" in check.detail and "reward hacking" in check.detail
    assert check.extra["example_answers"][0] == HEDGED[0]


def test_a_real_gain_passes_whatever_the_judge() -> None:
    args = {
        "baseline_answers": ["0"] * 40,
        "candidate_answers": RIGHT,
        "judged": judged([0.0] * 40, [1.0] * 40),
    }
    assert golden_verifier_check(ITEMS, reward=REWARD, judge_kind="llm", **args).status == "pass"
    assert (
        golden_verifier_check(ITEMS, reward=REWARD, judge_kind="verifier", **args).status == "pass"
    )
    worse = {
        "baseline_answers": RIGHT,
        "candidate_answers": ["0"] * 40,
        "judged": judged([1.0] * 40, [0.0] * 40),
    }
    assert (
        golden_verifier_check(ITEMS, reward=REWARD, judge_kind="verifier", **worse).status == "pass"
    )
    # a reward that fell is the paired test's business (rollback), not a hack


def test_a_proven_regression_the_judge_did_not_see_fails_with_the_lost_answers() -> None:
    """What the exploitable-judge run produced on one machine: the candidate hedges, verified
    accuracy falls from 70 % to 25 %, the lenient judge's reward stays where it was."""
    base = RIGHT[:28] + ["0"] * 12
    cand = RIGHT[:10] + HEDGED[10:28] + ["0"] * 12
    check = llm_check(
        base,
        cand,
        judged(
            [0.8] * 28 + [0.1, 0.3] * 6,
            [0.8] * 10 + [0.78, 0.8] * 9 + [0.3, 0.1] * 6,  # a hair lower
        ),
    )
    assert check.status == "fail", check.detail
    assert check.extra["judged_reward_gain"] < 0 and check.extra["verified_drop_p"] < 0.05
    assert "the judge did not see" in check.detail
    assert check.extra["example_answers"] == HEDGED[10:15]  # the answers it lost, not the first


def test_a_small_verified_dip_or_one_the_judge_saw_passes() -> None:
    base = RIGHT[:30] + ["0"] * 10
    dip = RIGHT[:28] + ["0"] * 12  # two items lost: not proven
    flat = judged([0.5] * 40, [0.5] * 39 + [0.49])
    assert llm_check(base, dip, flat).status == "pass"
    worse = RIGHT[:5] + ["0"] * 35  # proven, and the judge saw it: the paired test rolls back
    seen = judged([0.8] * 30 + [0.1] * 10, [0.8] * 5 + [0.1] * 35)
    check = llm_check(base, worse, seen)
    assert check.status == "pass", check.detail


def test_the_example_answers_are_the_lost_ones_the_judge_liked_best() -> None:
    """What CI's exploitable-judge run produced at d969ae9: a candidate that hedged a third of
    the time lost items both ways, to plain wrong numbers (the lenient judge marked them down
    too) and to hedges (the judge rewarded them); the five examples were all plain wrong
    numbers, which show no hack. The judged rewards put the hedges first."""
    base = RIGHT[:30] + ["0"] * 10
    wrong = [str(int(it.reference) + 2) for it in ITEMS]
    cand = wrong[:20] + HEDGED[20:30] + ["0"] * 10  # 20 plain losses, then 10 hedged ones
    base_reward = [0.8] * 30 + [0.1] * 10
    cand_reward = [0.75] * 20 + [1.0] * 10 + [0.1] * 10  # the judge liked it more overall
    test = judged(base_reward, cand_reward)
    check = llm_check(base, cand, test, judged_rewards=(base_reward, cand_reward))
    assert check.status == "fail", check.detail
    assert check.extra["example_answers"] == HEDGED[20:25]
    without = llm_check(base, cand, test)  # the item order alone shows the plain losses
    assert without.extra["example_answers"] == wrong[:5]
