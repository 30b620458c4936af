"""Identifiers typed in a hurry: a whole line in lower case ("passport fz 118 7342", a
traveller's row "grace mensah, ma8839201, gha, 1990-01-01"), a form in capitals whose number
runs into the next label ("PASSPORT NO K4471902 DOB ..."), the document's word typed as two
words or one letter off ("passprt", "licnece"; real words one letter off are left). On the precision side: the same lower case for orders, SKUs, tracking
numbers and ports keeps its values. Sentences written for this test, none from the corpora."""

from __future__ import annotations

import pytest
from presidio_analyzer import RecognizerResult

from tasks.pii.context import as_capitals, match_rules
from tasks.pii.generic.identifiers import RULES
from tasks.pii.generic.references import drop_references
from tasks.pii.generic.travel_documents import (
    travel_birth_date_spans,
    travel_document_spans,
    traveller_name_spans,
)
from tasks.pii.normalize import normalize


def _ids(text: str) -> set[str]:
    text = normalize(text).text  # as the engine reads it: "pasport" is the word one letter off
    found = {text[s:e] for s, e, _entity, _score in match_rules(text, RULES)}
    return found | {text[s:e] for s, e in travel_document_spans(text)}


def test_the_codes_of_a_line_in_lower_case_are_read_in_capitals_and_others_are_left() -> None:
    text = "Order 7a shipped\nmy passport is fz1187342, photos 2 of 35 x 45 mm, bra straße"
    view = as_capitals(text)
    assert len(view) == len(text)
    assert view == "Order 7a shipped\nmy passport is FZ1187342, photos 2 of 35 X 45 MM, BRA straße"


def test_a_row_typed_in_lower_case_names_its_traveller() -> None:
    text = "ines duarte | cb4410275 | prt | 1977-09-12"
    assert {text[s:e] for s, e in traveller_name_spans(text)} == {"ines duarte"}
    assert traveller_name_spans("the hinge | hb4410275 | prt | 2025-09-12") == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("my passport number is xb 441 0275 and i fly monday", "xb 441 0275"),
        ("pass port no ek7731902 pls update", "ek7731902"),
        ("pasport no EK7731902", "EK7731902"),
        ("PASSPORT NO K7731902 DOB 09 FEB 1988", "K7731902"),
        ("PASSPORT NO. K7731902 EXP 2031", "K7731902"),
        ("ines duarte, cb4410275, prt, 1977-09-12", "cb4410275"),
        ("Ines Duarte CB4410275 PRT 1977-09-12", "CB4410275"),  # spaces alone between fields
    ],
)
def test_a_passport_typed_in_a_hurry_is_found(text: str, value: str) -> None:
    assert value in _ids(text)


@pytest.mark.parametrize(
    "text",
    [
        "hi my order xb4410275 still hasnt shipped can u check",
        "its the blue one, size 42, sku ek7731902, thanks",
        "pass the port config to the container: -p 8080:80",
        "brass hinge hb4410275 prt 2025-09-12 200 pcs",
        "passport photos: 2 of 35 x 45 mm",
        "hi my order fz1187342 and the 2001-01-01 one",  # "and" is Andorra's code, no word here
        "PRODUCT NO K7731902 DATE 09 FEB 2026",
    ],
)
def test_codes_typed_the_same_way_are_left(text: str) -> None:
    assert _ids(text) == set()


def test_a_month_in_a_date_is_no_nationality_but_a_code_beside_a_date_is() -> None:
    assert travel_document_spans("14 MAR 1985 CB4410275 shipped") == []
    text = "Ines Duarte CB4410275 MAR 1977-09-12"  # Morocco's code, a field of its own
    assert {text[s:e] for s, e in travel_birth_date_spans(text)} == {"1977-09-12"}


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("my tracking number is jd 0146 0000 6281", False),
        ("tracking no. JD 0146 0000 6281", False),
        ("my order is at 0207 946 0958, call me", True),  # "at" is no code
    ],
)
def test_a_reference_s_letters_do_not_hide_its_word(text: str, kept: bool) -> None:
    start = next(i for i, c in enumerate(text) if c == "0" and text[i + 1].isdigit())
    end = start + len(text[start:].split(",")[0])
    phone = RecognizerResult("PHONE_NUMBER", start, end, 0.6)
    assert bool(drop_references(text, [phone])) is kept


def test_a_number_a_mail_client_wrapped_is_found_whole_and_a_short_line_is_no_wrap() -> None:
    first = "Hello, I need to change the name on my booking and my passport no. is PA 991"
    text = f"{first}\n8273 as printed on the data page"
    assert "PA 991\n8273" in _ids(text)
    assert "PA 991\n8273" not in _ids("my passport no. is PA 991\n8273")  # no wrap there


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("ok so its tomasz wieczorek, dob 04/12/1985", {"tomasz wieczorek"}),
        ("name chidi okafor ppt a07734521 born 22.07.1991", {"chidi okafor"}),
        ("can u update the booking for grace mensah pls", {"grace mensah"}),
        ("Can you update the booking for grace mensah", set()),  # capitals: the rules' text
        ("the grace period ended, cable fine", set()),
    ],
)
def test_names_typed_in_lower_case_are_found_by_the_learned_layer(
    text: str, names: set[str]
) -> None:
    from tasks.pii.ner.learned_names import load_layer, lower_case_name_spans

    assert {text[s:e] for s, e in lower_case_name_spans(load_layer(), text)} == names


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("my passprt number is 548213307", "548213307"),  # a letter dropped
        ("here is my passsport: PX1234567", "PX1234567"),  # one added
        ("PASSPROT NO K7745216", "K7745216"),  # two swapped
        ("passpot number FZ1187342", "FZ1187342"),
        ("driving licnece MORGA753116SM9IJ", "MORGA753116SM9IJ"),
        ("my drivers lisence number is D1234567", "D1234567"),  # one replaced
        ("my psport is 548213307", "548213307"),  # two dropped from a long word
        ("update the passpt number to GK774521", "GK774521"),
    ],
)
def test_a_document_word_one_letter_off_is_read_as_the_word(text: str, value: str) -> None:
    assert value in _ids(text)


def test_the_typo_is_read_right_but_the_text_keeps_it() -> None:
    text = "－ Passprt: ９ and my licnece"
    norm = normalize(text)
    assert norm.text == "- Passport: 9 and my licence"
    start = norm.text.index("Passport")
    assert text[slice(*norm.original_span(start, start + len("Passport")))] == "Passprt"
    end = norm.text.index("licence")
    assert text[slice(*norm.original_span(end, len(norm.text)))] == "licnece"
    assert text[slice(*norm.original_span(0, len(norm.text)))] == text


@pytest.mark.parametrize(
    "text",
    [
        "the field says Passwort, German for password",  # real words one letter off
        "licensed premises number 4471902",
        "a diving licence course, booking KX99213",
        "deriving 12 fields from the passage",
        "an assorted box, order 548213307",  # two dropped from "passport" is no such word
        "the field asks for your password, not the passport",  # two letters replaced
        "lince and liens: two letters dropped from a short word stay words",
    ],
)
def test_real_words_near_a_document_word_are_left(text: str) -> None:
    assert normalize(text).text == text
