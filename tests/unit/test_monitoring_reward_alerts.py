"""The alert rules of issue 16 (human review and the reward-hacking monitors) under
``promtool test rules``, with the real rule file (annotations aside, as in
test_monitoring_alerts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_monitoring_alerts import check_alert, series


def gauge(name: str, value: float) -> dict[str, str]:
    """A gauge as the Pushgateway exposes a stage's push (job and stage labels)."""
    return series(name, f"{value}x150", job="flywheel", stage="review")


CASES: dict[str, tuple[list[dict[str, str]], str, str, list[dict[str, str]]]] = {
    "reviewers disagree with the reward": (
        [gauge("flywheel_reward_human_spearman", 0.2), gauge("flywheel_reward_human_samples", 25)],
        "RewardHumanCorrelationLow",
        "5m",
        [{"severity": "warning"}],
    ),
    "reviewers agree with the reward": (
        [gauge("flywheel_reward_human_spearman", 0.8), gauge("flywheel_reward_human_samples", 25)],
        "RewardHumanCorrelationLow",
        "5m",
        [],
    ),
    "too few labels to say": (
        [gauge("flywheel_reward_human_spearman", 0.1), gauge("flywheel_reward_human_samples", 6)],
        "RewardHumanCorrelationLow",
        "5m",
        [],
    ),
    "users contradict the judge": (
        [
            gauge("flywheel_judge_feedback_agreement", 0.4),
            gauge("flywheel_judge_feedback_pairs", 80),
        ],
        "JudgeFeedbackDisagreement",
        "2h",
        [{"severity": "warning"}],
    ),
    "longer answers score higher": (
        [
            gauge("flywheel_reward_length_spearman", 0.8),
            gauge("flywheel_reward_length_samples", 300),
        ],
        "RewardLengthCorrelation",
        "2h",
        [{"severity": "warning"}],
    ),
    "answers repeat themselves": (
        [
            gauge("flywheel_answer_distinct_ratio", 0.1),
            gauge("flywheel_answer_distinct_answers", 300),
        ],
        "AnswerDiversityLow",
        "2h",
        [{"severity": "warning"}],
    ),
    "diverse answers": (
        [
            gauge("flywheel_answer_distinct_ratio", 0.7),
            gauge("flywheel_answer_distinct_answers", 300),
        ],
        "AnswerDiversityLow",
        "2h",
        [],
    ),
    "training entropy collapsed": (
        [series("flywheel_train_entropy", "3x30 1x30", job="flywheel", method="dpo")],
        "TrainingEntropyCollapse",
        "50m",
        [{"method": "dpo", "severity": "warning"}],
    ),
    "training entropy steady": (
        [series("flywheel_train_entropy", "3x30 2.5x30", job="flywheel", method="dpo")],
        "TrainingEntropyCollapse",
        "50m",
        [],
    ),
    "a candidate drifted far": (
        [series("flywheel_candidate_kl", "2.5x30", job="flywheel", model="v3")],
        "CandidateKLHigh",
        "10m",
        [{"model": "v3", "severity": "warning"}],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_reward_alert_behaviour(case: str, tmp_path: Path) -> None:
    check_alert(CASES[case], tmp_path)
