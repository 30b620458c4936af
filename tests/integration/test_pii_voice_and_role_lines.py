"""Three classes through the whole engine, each with its precision side: numbers read aloud in
a voice agent's transcript (a phone, a card, a passport with letters read out) while menus,
counts and order numbers read aloud stay; a phone asked for by how it is called ("a callback
number", "a number we can ring you on") while an order or ticket number answered the same way
stays; and one line opening with a role's label ("Customer: ...") that holds a message, not a
name, while a name under the label, in any case, is still replaced. Sentences written for
this test, none from the corpora."""

from __future__ import annotations

import pytest

from infra.settings import CurateSettings
from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine

pytestmark = pytest.mark.integration

CONFIG = PiiConfig.from_settings(CurateSettings())

GONE = [
    (
        "Caller: best to reach me on oh seven nine double one, triple four, five six seven",
        "seven nine",
    ),
    (
        "Caller: card is five five seven seven, four six three seven, zero six four three, three zero four four",
        "four six three seven",
    ),
    ("Caller: passport is G zero four X one one T eight two", "G zero four X"),
    ("Agent: Can I get a callback number?\nCaller: 07911 444567", "07911 444567"),
    ("Agent: what number can the driver text you on?\nCustomer: 0412 777 321", "0412 777 321"),
    ("Customer: kwame mensah", "kwame mensah"),
    ("Passenger: maria de la cruz", "maria de la cruz"),
]

UNTOUCHED = [
    "Caller: press one for sales, two for support, or stay on the line",
    "Caller: my order number is eight eight one two three four five and it never came",
    "Caller: I've called five six times, the error says four oh four",
    "Agent: Which order number is it about?\nCustomer: 7731004512",
    "Agent: Can I get the case number you were given?\nCustomer: 20240511",
    "Customer: charged twice for one month",
    "Customer: order number 77310045",
    "Caller: reference number 20240511 for the complaint",
    "Customer: booking date 12/03/2025, still not confirmed",
]


def _texts(texts: list[str]) -> list[str]:
    return [r.text for r in anonymize_texts(load_engine(CONFIG), texts)]


def test_numbers_read_aloud_phones_asked_by_how_they_are_called_and_labelled_names_go() -> None:
    for (text, value), out in zip(GONE, _texts([t for t, _v in GONE]), strict=True):
        assert value not in out, out
        # replaced by a placeholder, the speaker's label kept
        assert "<" in out and out.split(":")[0] == text.split(":")[0], out


def test_menus_counts_references_and_messages_under_a_role_label_stay() -> None:
    assert _texts(UNTOUCHED) == UNTOUCHED
