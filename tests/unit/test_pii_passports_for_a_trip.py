"""A passport number given for a trip without the word "passport": a booking or a flight word
that only says where the number goes ("the number on my reservation to ..."), a clause that
ends before the number's ("no loyalty card; scanned ID ..."), the holder's nationality said of
a person or of the document ("she's Polish", "the Dutch one", "(Brazilian)"), a traveller's
row whose only date is the document's expiry, and a later clause naming the number as the
traveller's document. On the precision side: a thing's or another number's word that labels
the value, a language or a brand where a nationality would be, a row of a product or a company
with a country code and a date. Sentences written for this test, none from the corpora."""

from __future__ import annotations

import pytest

from tasks.pii.generic.travel_documents import travel_document_spans


def _values(text: str) -> set[str]:
    return {text[s:e] for s, e in travel_document_spans(text)}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # a trip's word that only says where the number goes
        ("for the ferry booking, use FR4419027 and my DOB 02/02/1988", "FR4419027"),
        ("pls change the number on my reservation to EK5530917, it was renewed", "EK5530917"),
        # a clause that ends before the number's
        ("No loyalty card; scanned ID NB7730015, expiring 2029.", "NB7730015"),
        # a nationality said of the holder or of the document
        ("Add Ola Nowak to the trip, she's Polish, number EP4471923.", "EP4471923"),
        ("I'll be using NX2201874 this time, the Dutch one.", "NX2201874"),
        ("Guest: R. Alves (Brazilian), FZ8812034", "FZ8812034"),
        # a traveller's row whose only date is the expiry, the holder named in it
        ("Pieter de Vries | NLD | 512003871 | 2032-06-30", "512003871"),
        ("2) Maria Rossi, ITA, 40917736, exp 14.09.2031", "40917736"),
        # a later clause naming it as the traveller's document
        ("Could you add 733019482 to the booking? It's my travel document.", "733019482"),
    ],
)
def test_a_passport_given_for_a_trip_without_its_word_is_taken(text: str, value: str) -> None:
    assert value in _values(text)


@pytest.mark.parametrize(
    "text",
    [
        "booking ref BR4419027, expiring 2029 if unpaid",  # the thing's word labels the value
        "frequent flyer FF7730015 for the check-in",  # another number a traveller gives
        "baggage tag GB551203 was scanned at the border",  # a tag's number
        "Translated into Spanish, job TR4471923, due Friday.",  # a language, a job's number
        "Irish Ferries sailing, confirmation IF5530917",  # a brand, a confirmation's number
        "Gold Plan | USA | 512003871 | 2032-06-30",  # a plan's row, no person in it
        "Northwind Traders Ltd,GBR,40917736,2031-09-14,active",  # a company's row
        "Could you add 733019482 to the invoice? It's our purchase order.",  # no document
    ],
)
def test_a_trip_s_other_numbers_are_left(text: str) -> None:
    assert _values(text) == set()
