"""A document named once and given more than once or in the next turn, through the whole
engine: the answer under an agent's question, a group's list under a heading with each
owner's name, the number named after as "the number" in a mail about a passport, the word
glued to its number ("passportnumber") or shortened ("PSPT"), a surname typed in lower case
in a one-line form. The precision side: a chat's turns ("Customer: yes please"), a mail that
greets and then starts a paragraph ("Hello,\\n\\nBelow ..."), order and parcel numbers in a
text about passports. Sentences written for this test, none from the corpora."""

from __future__ import annotations

import pytest

from infra.settings import CurateSettings
from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine

pytestmark = pytest.mark.integration

CONFIG = PiiConfig.from_settings(CurateSettings())


def _texts(texts: list[str]) -> list[str]:
    return [r.text for r in anonymize_texts(load_engine(CONFIG), texts)]


GONE = [
    ("Agent: Which passport number is on the reservation?\nGuest: RT4471902", ["RT4471902"]),
    (
        "Hi,\n\nthe passports for our trip:\n- Oksana: 623018845\n- Taras: 623018846\n\nThanks",
        ["623018845", "623018846", "Oksana", "Taras"],
    ),
    ("Subject: my passport\n\nHello,\n\n623018845 is the number.\n\nBest", ["623018845"]),
    ("wife's passportnumber is 623018845 pls add it", ["623018845"]),
    ("PSPT 623018845 exp 11/31", ["623018845"]),
    ("it was 623018845 not 623018854 on the passport, sorry", ["623018845", "623018854"]),
    ("visa form: surname ferreira-lopes given names ana paula nationality prt", ["ferreira-lopes"]),
]

KEPT = [
    "Agent: Do you still have the receipt?\nCustomer: yes please",
    "Agent: Is the passport still valid?\nUser: until 2031 I think",
    "Hello,\n\nBelow are the order details you asked for.",
    "Subject: passport holder\n\n623018845 is the order number, thanks",
    "my passport is fine, 623018845 is the number of the parcel",
    "my ordernumber is 623018845 can u check",
    "surname change after the wedding, how do I update it?",
]


def test_every_number_of_a_named_document_and_its_owners_go() -> None:
    for text, (red,) in zip(GONE, (_texts([t]) for t, _w in GONE), strict=True):
        assert not [w for w in text[1] if w in red], red


def test_turns_greetings_and_order_numbers_stay() -> None:
    assert _texts(KEPT) == KEPT
