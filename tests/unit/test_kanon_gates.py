"""Quality gates, dedup, roles and k-anonymity decisions (pure logic, no Presidio)."""

from __future__ import annotations

from datetime import UTC, datetime

from infra.settings import CurateSettings
from tasks.curate.gates import apply_gates, normalise
from tasks.curate.kanon import k_anonymize

T0 = datetime(2026, 11, 22, 10, tzinfo=UTC)


def _row(tid: str, group: str, reward: float | None, **kw: object) -> dict:
    row = {
        "trace_id": tid,
        "prompt_group": group,
        "user_key": kw.pop("user", "u1"),
        "question": kw.pop("question", f"What is {group}?"),
        "answer": kw.pop("answer", f"answer {tid}"),
        "reward": reward,
        "latency_s": 0.5,
        "error_count": 0,
        "created_at": T0,
    }
    row.update(kw)
    return row


def test_each_drop_has_one_reason_and_low_siblings_stay_as_rejected_only() -> None:
    rows = [
        _row("a1", "A", 0.9),
        _row("a2", "A", 0.3),  # sibling of a train row: rejected_only
        _row("b1", "B", 0.5),  # no train sibling: dropped
        _row("c1", "C", 0.95, error_count=1),
        _row("d1", "D", 0.95, latency_s=31.0),
        _row("e1", "E", None),
        _row("f1", "F", 0.9, user="opted"),
        _row("g1", "G", 0.8, question=" what is g?? ", answer="Answer G"),
        _row("g2", "G2", 0.85, question="What is G", answer="answer g."),
    ]
    gated = apply_gates(rows, CurateSettings(), opted_out={"opted"})
    roles = {r["trace_id"]: r["eligible_as"] for r in gated.kept}
    assert roles == {"a1": "train", "a2": "rejected_only", "g2": "train"}
    assert gated.dropped == {
        "low_reward": 1,
        "errors": 1,
        "latency": 1,
        "no_reward": 1,
        "opted_out": 1,
        "duplicate": 1,
    }


def test_thresholds_come_from_settings() -> None:
    rows = [_row("a1", "A", 0.6), _row("b1", "B", 0.9, latency_s=12.0)]
    gated = apply_gates(rows, CurateSettings(min_reward=0.5, max_latency_s=10.0), opted_out=set())
    assert [r["trace_id"] for r in gated.kept] == ["a1"] and gated.dropped == {"latency": 1}


def test_normalise_folds_case_space_and_edge_punctuation() -> None:
    assert normalise("  What is   2+2?? ") == normalise("what is 2+2") == "what is 2+2"


def _ex(tid: str, pattern: str, user: str | None) -> dict:
    return {"trace_id": tid, "pattern": pattern, "user_key": user}


def test_k_counts_distinct_users_not_rows() -> None:
    rows = [_ex(f"t{i}", "p", "same-user") for i in range(10)]
    rows += [_ex("x1", "q", f"user{i}") for i in range(1)]
    decision = k_anonymize(rows, pending=[], table_members={}, k=5)
    assert decision.release == [] and len(decision.hold) == 11 and decision.patterns_held == 2


def test_k_counts_the_table_and_releases_pending_rows() -> None:
    rows = [_ex("n1", "p", "u4")]
    pending = [_ex("old1", "p", "u1"), _ex("old2", "p", "u2"), _ex("other", "z", "u9")]
    decision = k_anonymize(rows, pending=pending, table_members={"p": {"u3", "u5"}}, k=5)
    assert [r["trace_id"] for r in decision.release] == ["n1", "old1", "old2"]
    assert decision.released_ids == ["old1", "old2"] and decision.hold == []


def test_rows_without_a_user_count_once_each() -> None:
    rows = [_ex(f"t{i}", "p", None) for i in range(5)]
    assert len(k_anonymize(rows, pending=[], table_members={}, k=5).release) == 5
