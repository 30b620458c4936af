"""The subject of the clause that names a value decides what the value is: a document's number
stays a document's whatever place the clause names ("on the booking"), and a reference's
number stays a reference whatever document it mentions ("on my passport renewal"). Sentences
written for this test, none from the corpora."""

from __future__ import annotations

import pytest

from tasks.pii.clauses import subject_word
from tasks.pii.context import match_rules
from tasks.pii.generic.identifiers import RULES
from tasks.pii.generic.references import drop_references


def _values(text: str) -> set[str]:
    return {text[s:e] for s, e, _entity, _score in match_rules(text, RULES)}


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("the passport no. on the booking is X", "passport"),  # "no." ends no sentence
        ("the booking number on my passport renewal is X", "booking"),
        ("the number on the ticket is X", "ticket"),  # a bare number: its modifier says
        ("the number on my passport is X", "passport"),
        ("hi, the permit for the trip: X", "permit"),  # the clause after the comma
        ("could you update the visa no. on the file to X", "visa"),  # a correction's object
        ("the new number is X", ""),  # fillers only: nothing decided
        ("the passport of mine X", ""),  # no clause names the value
        # a clause that only restates the one before: that one's subject
        ("The passport number on my booking is wrong. It should read X", "passport"),
        ("the ticket number has a typo, it should be X", "ticket"),
        ("My licence is out of date; the correct one is X", "licence"),
        ("The passport is fine. The ticket number should be X", "ticket"),  # its own subject
        # a clause between commas or in brackets before the verb, a relative clause after
        # the noun: not the subject's
        ("the number of my passport, which I renewed in March, is X", "passport"),
        ("my passport (the new one, since the old one got wet) is X", "passport"),
        ("the licence number that I gave your colleague on the phone is X", "licence"),
        ("the reference the passport office gave me, on the phone, is X", "reference"),
        ("the order number for the passport holder, which arrived damaged, is X", "order"),
        ("please update the flight on my passport application to X", "flight"),
    ],
)
def test_the_subject_is_the_head_noun_of_the_clause_naming_the_value(text: str, word: str) -> None:
    assert subject_word(text, text.rindex("X")) == word


@pytest.mark.parametrize(
    "text",
    [
        "the passport number on our reservation is P4471902K",
        "Passport details in the boarding record: 58820163",
        "please correct the passport no. on the flight booking to GB5512039",
        "the licence number on the hire car booking is KENTR802115AB7CD",
    ],
)
def test_a_document_number_is_found_whatever_place_the_clause_names(text: str) -> None:
    assert _values(text) == {text.split()[-1]}


@pytest.mark.parametrize(
    "text",
    [
        "the booking reference on my passport application is 77120934",
        "the order number for my licence photos is 55013388",
        "the claim number on my passport insurance is CL2004417",
        "could you change the flight on my passport form to 88120345",
    ],
)
def test_a_reference_is_left_whatever_document_the_clause_names(text: str) -> None:
    assert _values(text) == set()


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # the document corrected in the next sentence, the thing only where it stands
        ("The passport number on the booking is wrong. It should read 548213370.", True),
        ("the passport I used for the booking has number 561190284", True),
        ("the passport or national id: 548213307", True),  # a holder's noun keeps it
        ("I put my licence in wrong, the right number is F2290174", True),  # a qualifier
        # a thing's own number, its correction, a clause of its own after ";"
        ("the passport office moved, the new appointment number is 20251104", False),
        ("I typed order 548213370 instead of 548213307 on the passport photo form", False),
        ("The passport is fine; the ticket number has a typo, it should be 125044188", False),
        ("The booking reference on my passport form is wrong. It should read 548213307.", False),
    ],
)
def test_corrections_keep_the_subject_they_restate(text: str, found: bool) -> None:
    assert bool(_values(text)) is found


class _Found:
    """A phone finding as Presidio gives it (the fields drop_references reads)."""

    def __init__(self, text: str, value: str) -> None:
        self.entity_type, self.start = "PHONE_NUMBER", text.index(value)
        self.end = self.start + len(value)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("the order number for my passport photos is 4401238876", False),
        ("ticket number on the visa form: 1762398810443", False),
        ("the best number for the courier is 07700 900456", True),  # a modifier never vetoes
    ],
)
def test_a_phone_shaped_number_headed_by_a_reference_word_is_a_reference(
    text: str, kept: bool
) -> None:
    value = text.split(" is ")[-1] if " is " in text else text.split(": ")[-1]
    found = _Found(text, value)
    assert (drop_references(text, [found]) == [found]) is kept  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # the document heads a long subject: its number however far the verb is
        (
            "The number of my passport, which I renewed in March because the old one was "
            "about to expire before our trip to Japan, is K7745216.",
            True,
        ),
        (
            "The driver's license number that I gave your colleague on the phone yesterday "
            "when I rang about the hire car is B8827364.",
            True,
        ),
        (
            "My new passport (I had to apply for an urgent one after losing the old one at "
            "the airport in Lisbon) is number K5521039.",
            True,
        ),
        # a thing heads it, the document is in its modifier or in the inserted clause
        (
            "The case number for my passport complaint, which I raised after waiting five "
            "weeks for the renewal, is 548213307.",
            False,
        ),
        (
            "The reference the passport office gave me, which I need to quote on every "
            "call, is PEX 2291 4471.",
            False,
        ),
        (
            "The flight my passport is booked on, after the change the airline made on "
            "Tuesday without asking, is BA 0117.",
            False,
        ),
    ],
)
def test_a_long_subject_is_read_to_its_head(text: str, found: bool) -> None:
    assert bool(_values(text)) is found
