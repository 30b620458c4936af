"""The shadow phase's verdict on mirrored pairs, scored by the stage-2 reward: a few pairs where
the candidate happens to answer worse are not evidence (the gate's small-sample rule); a
candidate clearly worse on those few pairs, or below the ratio on enough pairs, is rolled back."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from infra.settings import ReleaseSettings, Settings
from tasks.release.rollout import judge_shadow
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
    result = judge_shadow(pairs(30, wrong={0, 10, 20}), scorer=scorer, policy=POLICY)
    assert result.verdict == "fail" and "below 0.95 x stable" in result.reasons[0]
