"""The shadow phase's verdict on mirrored pairs, scored by the stage-2 reward: a mean below the
ratio that chance explains is not evidence, at any number of pairs; a candidate clearly worse
on a few pairs, or below the ratio and lower on one side only, is rolled back. A
non-inferiority release (a student) carries its margin: one point worse on 1,000 pairs
proceeds at a margin of two, ten points worse does not."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from infra.settings import ReleaseSettings, Settings
from tasks.release.canary.rollout import judge_shadow
from tests.helpers import make_trace

AT = datetime(2026, 11, 23, 10, tzinfo=UTC)
POLICY = ReleaseSettings(n_bootstrap=200, min_samples=30)


@pytest.fixture
def scorer(tmp_path: Path):
    from tasks.reward import Scorer

    return Scorer(Settings(home=tmp_path))


def pairs(n: int, *, wrong: set[int]) -> list:
    """``n`` mirrored requests; the shadow (candidate) answer is wrong for the ``wrong`` ones."""
    out = []
    for i in range(n):
        stable = make_trace(i, AT, route="stable", pairing_id=f"p{i}")
        answer = "7" if i in wrong and stable.answer != "7" else stable.answer
        out.append((stable, make_trace(i, AT, route="shadow", pairing_id=f"p{i}", answer=answer)))
    return out


def test_one_worse_answer_in_ten_pairs_is_not_a_rollback(scorer) -> None:
    result = judge_shadow(pairs(10, wrong={3}), scorer=scorer, policy=POLICY)
    assert result.verdict == "pass", result.reasons
    assert (
        result.evidence["test"]["mean_candidate"] < 0.95 * result.evidence["test"]["mean_baseline"]
    )  # below the ratio, but on ten pairs


def test_a_candidate_wrong_on_most_of_ten_pairs_is_rolled_back(scorer) -> None:
    result = judge_shadow(pairs(10, wrong=set(range(8))), scorer=scorer, policy=POLICY)
    assert result.verdict == "fail", result.reasons


def test_below_the_ratio_on_enough_pairs_is_rolled_back(scorer) -> None:
    """6 of 30 answers worse, none better (one-sided p 0.006, under the shadow's 0.01); 3 of 30
    (p 0.04) are not enough at the shadow's share of alpha."""
    result = judge_shadow(pairs(30, wrong={0, 5, 10, 15, 20, 25}), scorer=scorer, policy=POLICY)
    assert result.verdict == "fail" and "below 0.95 x stable" in result.reasons[0]
    weaker = judge_shadow(pairs(30, wrong={0, 10, 20}), scorer=scorer, policy=POLICY)
    assert weaker.verdict == "pass", weaker.reasons


def test_below_the_ratio_by_noise_on_enough_pairs_proceeds(scorer) -> None:
    """31 pairs where the candidate is worse on some and better on about as many: the mean is
    below 95 % of stable, but a paired test cannot tell it from chance (a CI run rolled back a
    0.495 -> 0.630 candidate on 0.598 -> 0.563, p 0.57)."""
    out = pairs(31, wrong=set(range(0, 30, 3)))  # ten answers worse
    for i in (1, 7, 13, 19, 25):  # five better: stable wrong, candidate right
        stable, shadow = out[i]
        wrong = "7" if stable.answer != "7" else "8"
        out[i] = (make_trace(i, AT, route="stable", pairing_id=f"p{i}", answer=wrong), shadow)
    result = judge_shadow(out, scorer=scorer, policy=POLICY)
    test = result.evidence["test"]
    assert test["mean_candidate"] < 0.95 * test["mean_baseline"]
    assert result.verdict == "pass", result.reasons


def student_pairs(n: int, *, lost: int, won: int, both: int = 0) -> list:
    """``n`` mirrored requests answered by a student: wrong where stable was right on the first
    ``lost``, right where stable was wrong on the next ``won``, wrong with stable on the next
    ``both``, as stable elsewhere."""
    out = pairs(n, wrong=set(range(lost)) | set(range(lost + won, lost + won + both)))
    for i in range(lost, lost + won + both):
        stable, shadow = out[i]
        wrong = "7" if stable.answer != "7" else "8"
        out[i] = (make_trace(i, AT, route="stable", pairing_id=f"p{i}", answer=wrong), shadow)
    return out


def test_a_student_one_point_worse_is_not_rolled_back_within_its_margin(scorer) -> None:
    """1,000 live pairs on which the student lost 12 answers and won 2: one point of verified
    accuracy worse, significant on the reward (two-sided p 0.008), so a release that must be
    better is rolled back; a non-inferiority release at a margin of 2 points proceeds (its
    95 % interval of the difference lies above -2), and one ten points worse is still rolled
    back."""
    one_point = student_pairs(1000, lost=12, won=2, both=150)  # stable at 85 %
    better_only = judge_shadow(one_point, scorer=scorer, policy=POLICY)
    assert better_only.verdict == "fail", better_only.reasons
    student = POLICY.model_copy(update={"noninferiority_margin": 2.0})
    result = judge_shadow(one_point, scorer=scorer, policy=student)
    assert result.verdict == "pass", result.reasons
    ni = result.evidence["noninferiority"]
    assert ni["scale"] == "verified accuracy"  # the gate's scale: the verifier's verdicts
    assert ni["mean_diff"] == pytest.approx(-1.0) and ni["ci_low"] > -2.0
    assert "margin 2" in result.reasons[0]

    ten_points = judge_shadow(
        student_pairs(120, lost=12, won=0, both=18), scorer=scorer, policy=student
    )
    assert ten_points.verdict == "fail", ten_points.reasons
    assert "worse than stable by more than the margin" in ten_points.reasons[0]
    assert ten_points.evidence["noninferiority"]["ci_high"] < -2.0


def test_a_non_inferiority_release_carries_its_margin_into_the_shadow_phase() -> None:
    from tasks.release.options import ReleaseOptions

    assert ReleaseOptions().policy(POLICY).noninferiority_margin is None
    student = ReleaseOptions(non_inferior=True).policy(POLICY, margin=3.0)
    assert student.noninferiority_margin == 3.0 and student.cost_ratio_max == 1.0
    own = ReleaseOptions(non_inferior=True, margin=1.5, cheaper=False).policy(POLICY, margin=3.0)
    assert own.noninferiority_margin == 1.5 and own.cost_ratio_max is None
