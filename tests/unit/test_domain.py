from __future__ import annotations

import random

import pytest

from tasks.demo import domain


@pytest.fixture(scope="module")
def golden() -> list[domain.DomainItem]:
    return domain.load_golden()


def test_golden_references_score_one(golden: list[domain.DomainItem]) -> None:
    assert len(golden) >= 300
    assert all(domain.verify(item, item.reference) == 1.0 for item in golden)
    # and through the plain-question path the score stage uses
    assert all(
        domain.verify(item.question, item.reference, contexts=item.contexts) == 1.0
        for item in golden
    )


@pytest.mark.parametrize(
    "answer", ["", "I don't know", "82", "80", "8", "811", "-81", "81 or 82", "82, 81", "18"]
)
def test_wrong_answers_score_zero(answer: str) -> None:
    assert domain.verify("What is 23+58?", answer) == 0.0


@pytest.mark.parametrize(
    "answer", ["81", " 81 ", "81.", "The answer is 81.", "23 + 58 = 81", "81\n81"]
)
def test_right_number_scores_one_however_phrased(answer: str) -> None:
    assert domain.verify("What is 23+58?", answer) == 1.0


def test_pii_preambles_do_not_confuse_the_verifier() -> None:
    questions = [
        "Hi, I'm Jane Roe, card 4111 1111 1111 1111. What is 23+58?",
        "My account is 123-45-678901 and my phone is +1-555-010-2233. Compute 23 plus 58.",
        "I'm Bo, IBAN GB82WEST12345698765432, call me at 555 0100. 23 + 58 = ?",
        "This is Ann from 12 Main St, Springfield, IL 62704. What's the sum of 23 and 58?",
    ]
    for q in questions:
        assert domain.parse_operands(q) == (23, 58), q
        assert domain.verify(q, "81") == 1.0
        assert domain.verify(q, "4111") == 0.0


def test_every_template_is_parsed() -> None:
    for name, _, _ in domain.TEMPLATES:
        item = domain.make_item(47, 36, name)
        assert domain.parse_operands(item.question) == (47, 36)
        assert domain.expected_answer(item.question) == "83"
        assert item.contexts == ["calculator: 47 + 36 = 83"]


def test_context_is_the_fallback_and_unknown_questions_raise() -> None:
    assert domain.verify("And the result?", "81", contexts=["calculator: 23 + 58 = 81"]) == 1.0
    with pytest.raises(domain.UnverifiableQuestion):
        domain.verify("How are you?", "fine")


def test_text_references_use_normalised_exact_match() -> None:
    item = domain.DomainItem("x", "Capital of France?", [], "Paris", "geo")
    assert domain.verify(item, " paris. ") == 1.0
    assert domain.verify(item, "Lyon") == 0.0


def test_simulator_never_sends_golden_pairs(golden: list[domain.DomainItem]) -> None:
    rng = random.Random(7)
    sampled = [domain.sample_question(rng) for _ in range(5000)]
    assert not any(domain.is_golden_question(item.question) for item in sampled)
    golden_ops = {item.operands for item in golden}
    assert not golden_ops & {item.operands for item in sampled}
    assert len({item.template for item in sampled}) == len(domain.TEMPLATES)


def test_golden_questions_are_recognised_in_any_order_and_phrasing(
    golden: list[domain.DomainItem],
) -> None:
    for item in golden:
        a, b = item.operands or (0, 0)
        assert domain.is_golden_question(item.question)
        assert domain.is_golden_question(f"Hey, Sam here. Compute {b} plus {a}.")
    assert set(domain.training_pairs()).isdisjoint(domain.golden_pairs())


def test_golden_items_are_consistent(golden: list[domain.DomainItem]) -> None:
    assert len({item.item_id for item in golden}) == len(golden)
    assert {item.slice for item in golden} == {"carry", "no_carry"}
    for item in golden:
        a, b = domain.parse_operands(item.question) or (0, 0)
        assert item.reference == str(a + b)
        assert item.slice == domain.slice_of(a, b)


def test_golden_set_is_reproducible(golden: list[domain.DomainItem]) -> None:
    assert domain.build_golden() == golden
