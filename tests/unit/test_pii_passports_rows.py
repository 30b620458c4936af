"""A passport number with no label at all, in a traveller's row: a name, the number, the
holder's nationality as ICAO's three-letter code and a date of birth, in whatever separators
a sheet or a chat gives them; and a passport read out in groups after its word. On the
precision side: a product's or a shipment's row carries a country code and a code of the same
shape, with a recent date. Sentences written for this test, none from the corpora."""

from __future__ import annotations

import pytest

from tasks.pii.context import match_rules
from tasks.pii.generic.identifiers import RULES
from tasks.pii.generic.travel_documents import (
    travel_birth_date_spans,
    travel_document_spans,
    traveller_name_spans,
)


def _row_values(text: str) -> set[str]:
    return {text[s:e] for s, e in travel_document_spans(text)}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Ines Duarte, PT, CB4410275, PRT, 1977-09-12", "CB4410275"),
        ("Okafor Chidi | A07731902 | NGA | 30 NOV 1984 | M", "A07731902"),
        ("Lars Dahl / 27719034 / NOR / 17.02.1966", "27719034"),  # Norway's eight digits
        ("Yuki Mori\tJPN\tTZ9034412\t1999/04/08", "TZ9034412"),
        ("and my wife (SWE, 91226374... no sorry, SWE, AA7316004, 1980-05-05)", "AA7316004"),
        ("Lee Seojun;KOR;M55172093;F;02-12-1993", "M55172093"),
    ],
)
def test_a_traveller_s_row_gives_its_passport_away_without_a_label(text: str, value: str) -> None:
    assert value in _row_values(text)


@pytest.mark.parametrize(
    "text",
    [
        "Brass hinge, HB4410275, PRT, 2025-09-12, 200 pcs",  # made in Portugal, shipped lately
        "SKU AB1234567 | KOR | restocked 2025-01-04 | 12 left",
        "order SO4410275, DEU, 1998-01-01 archive import",  # an order word before it
        "14 MAR 1985, case CB4410275",  # a month (MAR is Morocco's code too) is no nationality
        "KOR 2 - 1 JPN on 2024-06-14, ticket TK7731902",  # codes beside scores, a recent date
    ],
)
def test_a_row_without_a_traveller_s_facts_is_left(text: str) -> None:
    assert _row_values(text) == set()


def test_a_date_of_birth_written_without_separators_is_no_passport() -> None:
    assert "19930212" not in _row_values("Lee Seojun;KOR;19930212;F;02-12-1993")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("passport nr. 492 118 307, the US one", "492 118 307"),
        ("Passport — CB 441 0275", "CB 441 0275"),
        ("passport number: Z 8813 4402", "Z 8813 4402"),
    ],
)
def test_a_passport_read_out_in_groups_is_found_after_its_word(text: str, value: str) -> None:
    assert value in {text[s:e] for s, e, _entity, _score in match_rules(text, RULES)}


def test_grouped_digits_too_short_for_a_passport_are_left() -> None:
    rules = match_rules("passport photos: 35 45 mm, 2 of them", RULES)
    assert [r for r in rules if r[2] == "PASSPORT"] == []


def test_the_row_s_birth_date_is_taken_with_its_passport_and_no_other_date() -> None:
    text = "Ines Duarte, CB4410275, PRT, born 1977-09-12, booked 2026-01-30"
    births = {text[s:e] for s, e in travel_birth_date_spans(text)}
    assert births == {"1977-09-12"}
    assert travel_birth_date_spans("order SO4410275, PRT, 1999-09-12 archive import") == []


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Duarte, Ines | CB4410275 | PRT | 1977-09-12", {"Duarte", "Ines"}),
        ('"OKAFOR, CHIDI EMEKA";NGA;A07731902;M;30/11/1984', {"OKAFOR", "CHIDI EMEKA"}),
        ("Lars Dahl - 27719034 - NOR - 17.02.1966", {"Lars Dahl"}),
        ("Brass hinge, HB4410275, PRT, 2025-09-12, 200 pcs", set()),  # no traveller's row
    ],
)
def test_a_traveller_s_row_names_its_traveller(text: str, names: set[str]) -> None:
    assert {text[s:e] for s, e in traveller_name_spans(text)} == names
