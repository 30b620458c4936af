"""The English engine's pieces without the spaCy pipeline: normalisation with offsets mapped
back, identifiers after their cue words (and not after order words), pasted secrets, the
corroboration a model's name hit needs, romanised Korean names, and pii-eval's scoring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.errors import ConfigError
from tasks.pii.evaluation import _replaced_as, load_labelled
from tasks.pii.generic.addresses import street_address_spans
from tasks.pii.generic.identifiers import RULES, date_after_name
from tasks.pii.generic.secrets import secret_spans
from tasks.pii.names import corroborated
from tasks.pii.names.spans import romanised_korean_spans, structured_name_spans
from tasks.pii.normalize import normalize


def _found(entity: str, text: str) -> list[str]:
    rule = next(r for r in RULES if r.entity == entity)
    return [text[s:e] for s, e in rule.spans(text)]


def test_full_width_digits_and_dashes_map_back_to_what_the_user_typed() -> None:
    text = "RRN ９００１０１－１２３４５６７\u200b ok"
    norm = normalize(text)
    start = norm.text.index("900101-1234567")
    span = norm.original_span(start, start + len("900101-1234567"))
    assert text[span[0] : span[1]] == "９００１０１－１２３４５６７"
    assert normalize("plain ascii").starts is None  # the hot path copies nothing


@pytest.mark.parametrize(
    ("entity", "text", "value"),
    [
        ("PASSPORT", "my passport number is M123A4567 (new one)", "M123A4567"),
        ("PASSPORT", '{"passport_no": "M12345678"}', "M12345678"),
        ("DRIVER_LICENSE", "FL license no. S530-460-85-219-0", "S530-460-85-219-0"),
        ("DRIVER_LICENSE", "driver’s licence JONES710238HA3DX", "JONES710238HA3DX"),
        ("MEDICAL_ID", '{"member_id": "UHC928374650"}', "UHC928374650"),
        ("DATE_OF_BIRTH", "I was born on 3 March 1990 in Busan", "3 March 1990"),
        ("DATE_OF_BIRTH", "DOB: 04/12/1987", "04/12/1987"),
        ("BANK_ACCOUNT", "sort code 20-00-00 account number 55779911", "55779911"),
        ("US_SSN", "SSN 512839947 (no dashes sorry)", "512839947"),
    ],
)
def test_an_identifier_after_its_cue_is_found(entity: str, text: str, value: str) -> None:
    if entity == "DRIVER_LICENSE":
        text = normalize(text).text  # the engine folds typographic quotes before detection
    assert value in _found(entity, text)


@pytest.mark.parametrize(
    ("entity", "text"),
    [
        ("PASSPORT", "my passport expired, order 123456789 is unrelated"),
        ("BANK_ACCOUNT", "my account shows tracking number 1Z999AA10123456"),
        ("DATE_OF_BIRTH", "the appointment on 03/14/2025 at 2pm"),
        ("DRIVER_LICENSE", "the Galaxy S23 model SM-S911B"),
    ],
)
def test_order_tracking_and_model_numbers_stay(entity: str, text: str) -> None:
    assert _found(entity, text) == []


def test_pasted_secrets_are_found_and_ordinary_password_talk_is_not() -> None:
    def found(text: str) -> list[str]:
        return [text[s:e] for s, e in secret_spans(text)]

    assert found("key AKIAIOSFODNN7EXAMPLE here") == ["AKIAIOSFODNN7EXAMPLE"]
    assert found("bot 6123487790:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawk fails")
    assert found("my password is hunter2.") == ["hunter2"]
    assert found("PIN 7316") == ["7316"]
    assert found("my password is not working") == []
    assert found("the password reset link expired") == []


def test_brands_and_products_are_not_people_but_names_are() -> None:
    def ok(text: str, span: str, model: bool = True) -> bool:
        start = text.index(span)
        return corroborated(text, start, start + len(span), model=model)

    assert not ok("my Pixel 7a case cracked", "Pixel")
    assert not ok("Flight Delta 1432 is late", "Delta")
    assert not ok("I bank with Charles Schwab", "Charles Schwab")
    assert not ok("which is better, the Ray-Ban Meta glasses", "the Ray-Ban Meta")
    assert ok("Tell Michael the parcel is here", "Michael")
    assert ok("Zainab Abubakar +234 803 123 4567", "Zainab Abubakar")


def test_names_in_headers_json_airline_style_and_romanised_korean() -> None:
    def names(text: str) -> list[str]:
        return [text[s:e] for s, e in structured_name_spans(text)]

    assert "Sarah O'Neil" in names("From: Sarah O'Neil <s@x.com>\nTo: support")
    assert "Gil-dong Hong" in names('{"passenger_name": "Gil-dong Hong"}')
    assert "SMITH/JOHN MR" in names("1.1SMITH/JOHN MR seat 14C")
    assert "Fiona MacLeod" in names("Kind regards\n\nFiona MacLeod\n14 Rose Street")
    text = "hi its park jisoo, HONG GILDONG and Kim Minjun; park here"
    found = [text[s:e] for s, e in romanised_korean_spans(text)]
    assert found == ["park jisoo", "HONG GILDONG", "Kim Minjun"]


def test_addresses_with_and_without_a_street_suffix() -> None:
    def found(text: str) -> list[str]:
        return [text[s:e] for s, e in street_address_spans(text)]

    assert found("ship to 1842 Maple Grove Rd, Apt 3B, Columbus, OH 43215 thanks")
    assert "Via Garibaldi 8, 16124 Genova" in found("from Paolo, Via Garibaldi 8, 16124 Genova")
    assert found("I have 3 kids in the park") == []
    assert date_after_name("Lim Jaebeom 1994.01.06", len("Lim Jaebeom")) == (12, 22)


def test_a_value_counts_as_found_only_when_all_of_it_is_replaced() -> None:
    text = "passport M12345678 ok"
    start = text.index("M1")
    assert _replaced_as(text, "M12345678", "PASSPORT", [(start, start + 9, "PASSPORT")])
    assert _replaced_as(text, "M12345678", "PASSPORT", [(start, start + 5, "PASSPORT")]) is None
    assert _replaced_as(text, "M12345678", "PASSPORT", [(start, start + 9, "X")]) == "X"


def test_a_bad_labelled_line_is_named_by_number_never_by_content(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    good = {"text": "hi Sam", "entities": [{"type": "PERSON", "value": "Sam"}]}
    bad = {"text": "call 555-0100", "entities": [{"type": "PHONE_NUMBER", "value": "555-0199"}]}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ConfigError, match=r"labels.jsonl:2") as err:
        load_labelled(path)
    assert "555" not in str(err.value)
