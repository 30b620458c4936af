"""Preference pairs from curated rows: margins, roles, rolling buffer, decontamination, the
auto method rule (pure logic; the catalog round trip is in tests/integration)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tasks.demo import domain
from tasks.train.buffer import buffer_of
from tasks.train.methods import choose_method
from tasks.train.pairs import (
    ChatRender,
    GoldenFilter,
    completion_text,
    demo_render,
    normalize_question,
    pair_id,
    select,
)

W1, W2, W3 = "2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"
GOLDEN = domain.load_golden()
GOLDEN_Q = GOLDEN[0].question
A, B = next(p for p in domain.training_pairs())  # a non-golden operand pair
Q = f"What is {A}+{B}?"


def row(trace: str, group: str, answer: str, reward: float | None, **kw: Any) -> dict[str, Any]:
    base = {
        "trace_id": trace,
        "prompt_group": group,
        "user_key": f"key-{trace}",
        "question": f"Hi, I'm <PERSON>. {Q}",
        "contexts": [domain.calculator_context(A, B)],
        "answer": answer,
        "reward": reward,
        "reward_config_hash": "rc1",
        "eligible_as": "train" if (reward or 0) >= 0.7 else "rejected_only",
        "window": W1,
        "created_at": datetime(2026, 1, 1, tzinfo=UTC),
    }
    return {**base, **kw}


def run(rows: list[dict[str, Any]], **kw: Any) -> Any:
    kw.setdefault("min_margin", 0.2)
    kw.setdefault("contaminated", GoldenFilter(GOLDEN, domain.is_golden_question))
    return select(rows, **kw)


def test_pair_is_best_train_answer_vs_worst_answer_of_the_group() -> None:
    right = str(A + B)
    sel = run(
        [
            row("t1", "g", right, 0.9),
            row("t2", "g", "12", 0.1),
            row("t3", "g", "13", 0.3),
            row("t4", "g", right, 0.8),
        ]
    )
    assert len(sel.pairs) == 1
    pair = sel.pairs[0]
    assert pair["prompt"] == f"Q: {Q}\nA:"  # exactly what the gateway serves
    assert (pair["chosen"], pair["rejected"]) == (f" {right}", " 12")
    assert pair["reward_diff"] == pytest.approx(0.8)
    assert pair["user_keys"] == ["key-t1", "key-t2"]
    assert pair["windows"] == [W1]
    assert pair["pair_id"] == pair_id("t1", "t2")
    assert sel.pair_trace_ids == ["t1", "t2"]
    assert sel.reward_config_hashes == ["rc1"]


def test_small_margin_and_rejected_only_best_make_no_pair() -> None:
    sel = run(
        [
            row("a1", "close", "1", 0.75),
            row("a2", "close", "2", 0.6),  # margin 0.15 < 0.2
            row("b1", "nogood", "1", 0.6, eligible_as="rejected_only"),
            row("b2", "nogood", "2", 0.1),  # best answer failed a curate gate: no chosen
        ]
    )
    assert sel.pairs == []
    assert sel.counts["groups_below_margin"] == 1
    assert sel.counts["groups_without_train"] == 1
    assert [s["trace_id"] for s in sel.sft] == ["a1"]  # RFT takes only "train" rows


def test_golden_questions_and_near_duplicates_are_never_used_and_are_counted() -> None:
    a, b = GOLDEN[1].operands or (0, 0)
    rows = [
        row("g1", "gold", "1", 0.9, question=f"Hi <PERSON>! {GOLDEN_Q}"),
        row("g2", "gold", "2", 0.1, question=f"Hi <PERSON>! {GOLDEN_Q}"),
        row("g3", "swapped", "1", 0.9, question=f"What is {b} + {a}?"),  # other order
        row("g4", "spaced", "1", 0.9, question=GOLDEN_Q.upper().replace("?", " ?")),
        row("ok1", "fine", "1", 0.9),
        row("ok2", "fine", "2", 0.1),
    ]
    sel = run(rows)
    assert sel.counts["decontaminated"] == 4
    assert [p["prompt_group"] for p in sel.pairs] == ["fine"]
    assert {s["trace_id"] for s in sel.sft} == {"ok1"}


def test_near_duplicate_normalisation_ignores_placeholders_case_spacing_and_zeros() -> None:
    assert normalize_question("Hi <PERSON>. What is 07 + 58 ?") == "what is 7 58"
    assert normalize_question("what is 7+58?") == "what is 7 58"
    custom = GoldenFilter([domain.DomainItem("x", "Who wrote Hamlet?", [], "Shakespeare", "all")])
    assert custom("Hello <PERSON>, who   wrote HAMLET?")
    assert not custom("Who wrote Macbeth?")


def test_opted_out_users_and_unscored_rows_are_dropped() -> None:
    rows = [
        row("u1", "g", "1", 0.9, user_key="withdrawn"),
        row("u2", "g", "2", 0.1),
        row("u3", "g", "3", None),
    ]
    sel = run(rows, opted_out={"withdrawn"})
    assert sel.counts["dropped_opted_out"] == 1
    assert sel.counts["dropped_unscored"] == 1
    assert sel.pairs == []


def test_identical_answers_make_no_pair_and_selection_is_deterministic() -> None:
    rows = [row("x1", "g", "5", 0.9), row("x2", "g", "5", 0.2)]
    assert run(rows).counts["groups_same_answer"] == 1
    rows = [row(f"t{i}", f"g{i % 3}", str(i), 0.9 if i % 2 else 0.1) for i in range(12)]
    first, second = run(rows), run(list(reversed(rows)))
    assert [p["pair_id"] for p in first.pairs] == [p["pair_id"] for p in second.pairs]


def test_rolling_buffer_keeps_the_last_k_windows() -> None:
    assert buffer_of([W3, W1, W2, W2, ""], 2) == [W2, W3]
    assert buffer_of([W3, W1], 0) == [W1, W3]


def test_completion_joins_answer_to_prompt_like_pretraining() -> None:
    assert completion_text("Q: x?\nA:", "81") == " 81"
    assert completion_text("<|assistant|>\n", " 81 ") == "81"
    # a chat template's renderer: the Llama profile was pre-trained on "<|assistant|>81<|end|>"
    prompt = "<|user|>What is 23+58?<|end|>\n<|assistant|>"
    assert completion_text(prompt, " 81", separator=ChatRender.separator) == "81"
    assert demo_render("Hi <PERSON>. What is 1+2?") == "Q: What is 1+2?\nA:"


@pytest.mark.parametrize(
    ("requested", "pairs", "singles", "method", "reason"),
    [
        ("auto", 60, 100, "dpo", "auto: 60 pairs >= minimum 50 -> dpo"),
        ("auto", 10, 80, "rft", "auto: 10 pairs < minimum 50, 80 high-reward answers -> rft"),
        ("auto", 10, 20, None, "skipped: 10 pairs < minimum 50"),
        ("dpo", 12, 900, None, "skipped: 12 pairs < minimum 50"),
        ("rft", 0, 50, "rft", "requested rft: 50 high-reward answers"),
    ],
)
def test_auto_picks_by_data_size_and_says_why(
    requested: str, pairs: int, singles: int, method: str | None, reason: str
) -> None:
    choice = choose_method(requested, pairs=pairs, singles=singles, prompts=200, min_pairs=50)
    assert (choice.method, choice.reason) == (method, reason)
