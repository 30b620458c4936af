"""A chat's answers read as what was asked: the fields an agent's turn asks for, in order, and
the other speaker's next turn with a value (after a filler turn or two, one row per traveller);
what answers a field that is no personal one (a hotel's name, an order date, a ticket number)
is claimed. Sentences written for this test, none from the corpora."""

from __future__ import annotations

import pytest

from tasks.pii.generic.asked import OTHER, answers


def _answers(text: str) -> list[tuple[str, str]]:
    return [(text[s:e], kind) for s, e, kind in answers(text)]


def test_the_parts_of_an_answer_are_the_fields_asked_for_in_order() -> None:
    text = (
        "Agent: I need a few details: full name, passport number, and date of birth.\n"
        "Customer: Anna Weber, 548213307, 12/03/1985"
    )
    assert _answers(text) == [
        ("Anna Weber", "PERSON"),
        ("548213307", "PASSPORT"),
        ("12/03/1985", "DATE_OF_BIRTH"),
    ]


def test_an_answer_on_lines_after_a_filler_turn_and_one_row_per_traveller() -> None:
    lines = "Agent: To verify, please confirm name, DOB and licence number\nCustomer: Tom Berg\n02/11/1979\nMORGA753116SM9IJ"
    assert [k for _v, k in _answers(lines)] == ["PERSON", "DATE_OF_BIRTH", "DRIVER_LICENSE"]
    late = "Agent: Your licence number, please?\nCustomer: hang on, it's in the car\nCustomer: ok here C4418203"
    assert _answers(late) == [("C4418203", "DRIVER_LICENSE")]
    rows = (
        "[agent] name + passport no. for each traveller please\n"
        "[customer] Anna Weber, 548213307\n[customer] Ben Weber, 561190284"
    )
    assert [v for v, k in _answers(rows) if k == "PASSPORT"] == ["548213307", "561190284"]


@pytest.mark.parametrize(
    ("text", "claimed"),
    [
        (
            "Agent: Could you confirm the name of the hotel and the booking number?\n"
            "Customer: Grand Budapest, 561190284",
            ["Grand Budapest", "561190284"],
        ),
        (
            "Agent: name of the product and the order date?\nCustomer: Everest Backpack, 03/02/2025",
            None,
        ),
        (
            "Agent: What's your ticket number?\nCustomer: checking\nCustomer: it's 561190284",
            ["561190284"],
        ),
    ],
)
def test_what_answers_another_field_is_claimed(text: str, claimed: list[str] | None) -> None:
    found = _answers(text)
    assert found and all(kind == OTHER for _v, kind in found)
    if claimed:
        assert [v for v, _k in found] == claimed


@pytest.mark.parametrize(
    "text",
    [
        # no question for fields: a yes/no question, a statement, the asker speaking again
        "Agent: Can you confirm the passport is valid for six months?\nUser: Yes. Booking ref 548213307",
        "Agent: Your order number is 548213307.\nCustomer: Anna Weber",
        "Agent: passport number and date of birth please\nCustomer: sure, one moment\nAgent: take your time",
        # no conversation: one speaker
        "Customer: my passport number? 548213307",
    ],
)
def test_nothing_is_read_where_no_field_was_asked_or_answered(text: str) -> None:
    assert not [k for _v, k in _answers(text) if k != OTHER]


def test_an_order_word_in_the_answer_claims_its_number() -> None:
    text = "Agent: Do you have your passport with you?\nCustomer: yes, and my order number is 548213307"
    assert not [k for _v, k in _answers(text) if k != OTHER]


@pytest.mark.parametrize(
    "text",
    [
        "Agent: What's your order number?\nCustomer: I don't have it, but my passport is 548213307",
        "Agent: order number and date?\nCustomer: my passport is 548213307, 12/03/2025",
    ],
)
def test_a_sentence_in_the_answer_is_not_claimed_as_another_fields_value(text: str) -> None:
    """Only a value alone (a word or two around it) answers a field that is no personal one: a
    sentence may say what else its number is, and the recognisers' findings in it stay."""
    assert "548213307" not in [v for v, k in _answers(text) if k == OTHER]


def test_chat_messages_serialised_as_json_are_turns_too() -> None:
    # the chat-completions shape a trace export or a tool result carries, a key between
    text = (
        '[{"role": "system", "content": "You are a travel agent."}, '
        '{"role": "assistant", "content": "Sure. Can you give me the booking reference and '
        'the passport number of the traveller?"}, '
        '{"role": "user", "name": "web", "content": "XK4Q7P and C01X00T47"}]'
    )
    assert _answers(text) == [("XK4Q7P", OTHER), ("C01X00T47", "PASSPORT")]
    asked = '[{"role": "assistant", "content": "What is your date of birth?"}, '
    assert _answers(asked + '{"role": "user", "content": "12/03/1985"}]') == [
        ("12/03/1985", "DATE_OF_BIRTH")
    ]
    # one speaker alone is no conversation; an order number asked is claimed, no passport
    assert _answers('[{"role": "user", "content": "What is your passport number?"}]') == []
    order = '[{"role": "assistant", "content": "What is your order number?"}, '
    assert _answers(order + '{"role": "user", "content": "A1234567"}]') == [("A1234567", OTHER)]
