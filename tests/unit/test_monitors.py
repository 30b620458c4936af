"""The reward-hacking and collapse monitors (tasks/monitors.py) and the review sample
(tasks/review.py): pure functions on synthetic windows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from infra.metrics.stage import StageReport
from infra.settings import ReviewSettings
from tasks.monitors import (
    distinct_ratio,
    judge_feedback_agreement,
    report_gauges,
    reward_length_spearman,
    window_monitors,
)
from tasks.review import parse_labels, sample_for_review, weekly_correlation


def test_agreement_counts_only_traces_with_a_verdict_and_an_opinion() -> None:
    judge = [0.9, 0.2, 0.8, None, 0.7, 0.1]
    feedback = [1.0, 0.0, 0.0, 1.0, 0.5, None]  # agree, agree, disagree, -, neutral, -
    assert judge_feedback_agreement(judge, feedback) == (pytest.approx(2 / 3), 3)
    assert judge_feedback_agreement([None], [1.0]) == (None, 0)


def test_length_correlation_flags_a_reward_that_grows_with_length() -> None:
    answers = ["x" * n for n in range(1, 21)]
    padded, n = reward_length_spearman([n / 20 for n in range(1, 21)], answers)
    assert padded == pytest.approx(1.0) and n == 20
    honest, _ = reward_length_spearman([(n * 7) % 5 / 5 for n in range(1, 21)], answers)
    assert honest is not None and abs(honest) < 0.5
    assert reward_length_spearman([0.5, 0.5, 0.5], ["a", "bb", "ccc"]) == (None, 3)


def test_diversity_folds_case_and_spaces() -> None:
    assert distinct_ratio(["42", " 42", "42 ", "Forty two", "forty  two"]) == (0.4, 5)
    assert distinct_ratio([]) == (None, 0)


def test_window_monitors_become_gauges() -> None:
    rollouts = pa.table({"trace_id": ["a", "b", "c", "d"], "answer": ["1", "22", "333", "1"]})
    scores = pa.table(
        {
            "trace_id": ["a", "b", "c", "d"],
            "reward": [0.2, 0.5, 0.9, 0.2],
            "reward_judge": [0.9, None, 0.9, 0.1],
            "reward_feedback": [0.0, 1.0, 1.0, 0.0],
        }
    )
    gauges = window_monitors(rollouts, scores)
    assert gauges["flywheel_judge_feedback_agreement"] == pytest.approx(2 / 3)
    assert gauges["flywheel_judge_feedback_pairs"] == 3
    assert gauges["flywheel_answer_distinct_ratio"] == 0.75
    assert gauges["flywheel_reward_length_spearman"] > 0.9
    report = StageReport("score")
    report_gauges(report, gauges)
    assert report.gauges["flywheel_answer_distinct_ratio"][()] == 0.75


def _rows(n: int) -> list[dict]:
    return [
        {
            "trace_id": f"t{i:04d}",
            "eligible_as": "train" if i % 4 else "rejected_only",
            "reward": 0.9 if i % 4 else 0.3,
            "reward_feedback": 0.0 if i in (5, 9) else (1.0 if i % 3 else None),
        }
        for i in range(n)
    ]


def test_review_sample_is_two_percent_plus_the_edge_cases_and_stable_per_window() -> None:
    rows = _rows(400)
    policy = ReviewSettings()
    items = sample_for_review(rows, window="2026-11-22T10:00:00Z", policy=policy)
    random_ids = [i["trace_id"] for i in items if i["reason"] == "random"]
    edges = [i for i in items if i["reason"] == "edge"]
    assert len(random_ids) == 6  # ceil(2 % of 300 eligible)
    assert all(int(t[1:]) % 4 for t in random_ids)  # eligible rows only
    assert len(edges) == 8  # ceil(2 % of 400 written)
    # the biggest |reward - feedback| first: no row left out disagrees more than an edge case
    gap = {
        r["trace_id"]: abs(r["reward"] - r["reward_feedback"])
        for r in rows
        if r["reward_feedback"] is not None
    }
    chosen = set(random_ids) | {e["trace_id"] for e in edges}
    assert min(gap[e["trace_id"]] for e in edges) >= max(
        g for t, g in gap.items() if t not in chosen
    )
    assert {"t0005", "t0009"} <= chosen  # high reward, thumbs down
    again = sample_for_review(rows, window="2026-11-22T10:00:00Z", policy=policy)
    assert [i["trace_id"] for i in again] == [i["trace_id"] for i in items]
    other = sample_for_review(rows, window="2026-11-22T11:00:00Z", policy=policy)
    assert [i["trace_id"] for i in other] != [i["trace_id"] for i in items]
    assert len(sample_for_review(_rows(8), window="w", policy=policy)) >= 1  # at least one


def test_labels_parse_from_csv_and_jsonl_and_spearman_is_weekly() -> None:
    from datetime import UTC, datetime

    labels, blank = parse_labels("trace_id,human_score,reviewer\na,0.5,r1\nb,,\n", fmt="csv")
    assert [(x.trace_id, x.human_score, x.reviewer) for x in labels] == [("a", 0.5, "r1")]
    assert blank == 1
    labels, _ = parse_labels('{"trace_id": "a", "human_score": 1}\n\n', fmt="jsonl")
    assert labels[0].human_score == 1.0
    week1, week2 = datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 23, tzinfo=UTC)
    items = [
        {"reward": r, "human_score": h, "labelled_at": at}
        for at, pairs in (
            (week1, [(0.1, 0.1), (0.5, 0.6), (0.9, 0.8)]),
            (week2, [(0.1, 0.9), (0.5, 0.5), (0.9, 0.1), (0.7, 0.2)]),
        )
        for r, h in pairs
    ]
    weeks = weekly_correlation(items)
    assert [(w.week, w.samples) for w in weeks] == [("2026-W47", 3), ("2026-W48", 4)]
    assert weeks[0].spearman == pytest.approx(1.0) and weeks[1].spearman == pytest.approx(-1.0)
