"""A document named once, its numbers given more than once or in the next turn: the answer
to an agent's question ("Can you confirm the passport number for the booking?\\nCustomer:
..."), a list of a group's passports (inline, or an e-mail's lines under a heading), a
correction ("should be X not Y"), a doubt ("X or maybe Y"). On the precision side: the same
shapes for orders, invoices and tickets keep their values, a list ends at another thing's
word, and a chat's "Customer: yes please" or a mail's "Hello,\\n\\nBelow are..." names no
one. Sentences written for this test, none from the corpora."""

from __future__ import annotations

import pytest
from presidio_analyzer import RecognizerResult

from tasks.pii.context import match_rules
from tasks.pii.generic.documents import same_documents, shape
from tasks.pii.generic.identifiers import RULES
from tasks.pii.generic.structured import forced_spans, scan
from tasks.pii.ner.spacy_names import _fallback_name_spans


def _found(text: str) -> dict[str, str]:
    """value -> entity, from the context rules and then the document's other numbers."""
    hits = [RecognizerResult(e, s, t, sc) for s, t, e, sc in match_rules(text, RULES)]
    out = {text[r.start : r.end]: r.entity_type for r in hits}
    out.update({text[s:e]: entity for s, e, entity in same_documents(text, hits)})
    return out


@pytest.mark.parametrize(
    ("text", "values"),
    [
        (
            "Agent: Can you confirm the passport number for the booking?\nCustomer: 548213307",
            ["548213307"],
        ),
        (
            "> Could you send the passport number as it appears on the ticket?\n\nLK0098231",
            ["LK0098231"],
        ),
        (
            "[agent] please send the passport numbers for both travellers\n[customer] 533412987 and 561190284",
            ["533412987", "561190284"],
        ),
        (
            "We hold two passports, Irish 533412987 and Maltese MT1234567",
            ["533412987", "MT1234567"],
        ),
        (
            "Passport numbers for the tour: Ines Duarte CB4410275, Olu Bankole 31874592",
            ["CB4410275", "31874592"],
        ),
        (
            "Good morning,\n\nBelow are the passport details you asked for.\n\nIrena Novak - CB123456\nTomas Novak - CB654321",
            ["CB123456", "CB654321"],
        ),
        (
            "Passports for the booking:\n1. Irena Novak, 548213307\n2. Tomas Novak, EK4471902",
            ["548213307", "EK4471902"],
        ),
        (
            "the passport number was wrong, it should be 548213370 not 548213307",
            ["548213370", "548213307"],
        ),
        (
            "passport 548213307 or maybe 548213370, I cannot read my own writing",
            ["548213307", "548213370"],
        ),
        (
            "Subject: Passport\n\nHi,\n\nLK0098231 is the number, expiry March 2031.",
            ["LK0098231"],
        ),
        (
            "the passport numbers are 533412987 (mine) and 561190284 (my son's)",
            ["533412987", "561190284"],
        ),
    ],
)
def test_every_number_of_a_named_document_is_found(text: str, values: list[str]) -> None:
    found = _found(text)
    assert {v: found.get(v) for v in values} == dict.fromkeys(values, "PASSPORT")


@pytest.mark.parametrize(
    "text",
    [
        "Agent: Can you confirm the order number for the refund?\nCustomer: 548213307",
        "Agent: Is it the passport or the booking number?\nUser: 548213307",
        "Agent: Do you have your passport with you?\nCustomer: yes, my order number is 548213307",
        "How long does a passport renewal take?\n\n12345678 is my ticket number",
        "my passport renewal application (ref 548213307) is pending",
        "Passports for the group trip:\n- Anna: order 548213307\n- Ben: order 561190284",
        "invoices: 548213307, 561190284, C01X00T47",
        "Subject: passport photos\n\n548213307 is the order number, thanks",
        "my passport is fine, 548213307 is the number of the parcel",
    ],
)
def test_an_order_ticket_or_invoice_number_keeps_its_value(text: str) -> None:
    assert _found(text) == {}


def test_a_list_ends_at_another_things_word_or_a_date() -> None:
    found = _found("passport 548213307 and licence D1234567, order 561190284")
    assert found == {"548213307": "PASSPORT", "D1234567": "DRIVER_LICENSE"}
    assert _found("Passport (UK): 548213307 | Exp: 2031-04-01") == {"548213307": "PASSPORT"}
    assert _found("can you put 548213307 in as my passport") == {"548213307": "PASSPORT"}


def test_a_shape_is_carried_unless_another_word_claims_it() -> None:
    text = "Passport 548213307. Your booking reference is 561190284, seat 12345678 too"
    assert _found(text) == {"548213307": "PASSPORT"}
    assert shape("AB 12-x9") == "AA 99-a9"
    short = "my passport no is 4471 and the kids' are 4472, 4473"
    assert [
        e for _s, _e, e in same_documents(short, [RecognizerResult("PASSPORT", 18, 22, 0.6)])
    ] == []


def test_a_list_items_label_is_its_owners_name_where_the_lexicon_knows_it() -> None:
    text = "Here are the passports for our group:\n- Anna: 548213307\n- Desk lamp: 561190284"
    hits = [RecognizerResult("PASSPORT", text.index("548213307"), text.index("548213307") + 9, 0.6)]
    found = {text[s:e]: entity for s, e, entity in same_documents(text, hits)}
    assert found == {"561190284": "PASSPORT", "Anna": "PERSON"}


def _forced_names(text: str) -> list[str]:
    return [text[s:e] for s, e, label, _bare in forced_spans(text, scan(text)) if label == "PERSON"]


def test_a_chats_turns_are_no_names_and_a_tickets_people_still_are() -> None:
    assert _forced_names("Agent: Do you still have it?\nCustomer: yes please") == []
    assert _forced_names("Agent: Is the passport still valid?\nUser: till 2031 I think") == []
    assert _forced_names("Customer: Ines Duarte\nAgent: Olu Bankole") == [
        "Ines Duarte",
        "Olu Bankole",
    ]


def test_a_greeting_names_on_its_own_line_and_a_sign_off_on_the_next() -> None:
    def names(text: str) -> list[str]:
        return [text[s:e] for s, e in _fallback_name_spans(text, None)]

    assert names("Hello,\n\nBelow are the order details you asked for.") == []
    assert names("Hello, Irena\n\nthe parcel is late") == ["Irena"]
    assert names("the parcel is late\n\nKind regards,\nIrena Novak") == ["Irena Novak"]
