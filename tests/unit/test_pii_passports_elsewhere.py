"""A passport number whose document is named somewhere other than right before it: after it
("... is my passport number"), by a data page's own labels ("Type P", "Code FRA") on its line
or on the form's lines around it, or right before it but typed as a phone types it (lower
case, spaced). And on the precision side: the number field of a record whose own type says
it is an invoice or an order, and a phone-shaped code. Sentences written for this test, none
from the corpora."""

from __future__ import annotations

import json

import pytest
from presidio_analyzer import RecognizerResult

from tasks.pii.context import match_rules
from tasks.pii.generic.fields import field_type, valid_value
from tasks.pii.generic.identifiers import RULES
from tasks.pii.generic.references import drop_references
from tasks.pii.generic.structured import scan
from tasks.pii.generic.travel_documents import travel_document_spans


def _rule_values(text: str) -> set[str]:
    return {text[s:e] for s, e, _entity, _score in match_rules(text, RULES)}


def _page_values(text: str) -> set[str]:
    return {text[s:e] for s, e in travel_document_spans(text)}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("K7745216 is my passport number if the form asks", "K7745216"),
        ("try 31874592 — that's the Norwegian passport", "31874592"),
        ("the second traveller: X0D4R2PL9 (her old passport)", "X0D4R2PL9"),
        ("Number is GB5512039, it's on my husband's passport", "GB5512039"),
    ],
)
def test_a_number_is_a_passport_when_the_clause_after_it_names_one(text: str, value: str) -> None:
    assert value in _rule_values(text)


@pytest.mark.parametrize(
    "text",
    [
        "K7745216 broke the passport photo uploader again",  # the clause says something else
        "order 31874592 is for my passport photos",  # an order word before it
        "K7745216 is the build hash, not my passport",  # the clause names another thing
    ],
)
def test_a_number_followed_by_another_clause_is_left(text: str) -> None:
    assert _rule_values(text) == set()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("pp no x0d4r2pl9 for my daughter", "x0d4r2pl9"),  # ICAO's nine, typed in lower case
        ("her passport number is 07 KT 11834", "07 KT 11834"),  # a French one, spaced
    ],
)
def test_a_passport_typed_on_a_phone_is_found_after_its_word(text: str, value: str) -> None:
    assert value in _rule_values(text)


def test_a_lower_case_nine_without_the_word_is_left() -> None:
    assert _rule_values("the commit x0d4r2pl9 is on main") == set()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Type: P  Code: NOR  No: 07KT11834  Date of expiry: 02 JUN 2033", "07KT11834"),
        ('{"doc_type": "P", "number": "X0D4R2PL9"}', "X0D4R2PL9"),
        ("Type: P\nIssuing state code: NLD\nDocument no.: NW3K1P7R4\nSurname: —", "NW3K1P7R4"),
        ("Number: K7745216\nType: P", "K7745216"),
        # digits alone under type P: a form's number word, an APIS line, a sheet's column
        ("Type: P\nNumber: 548213307\nNationality: British", "548213307"),
        ("APIS: doc P, nat GBR, num 548213307, exp 01APR29", "548213307"),
        ("type,number,country\nP,548213307,GBR", "548213307"),
        ("doc_type;doc_no;nationality\nP;561190284;IRL\nP;548213370;GBR", "548213370"),
        # a traveller's facts: a labelled date of birth, a check-in, a travel ID, a sheet's
        # document column, a traveller's expiry
        ("Passenger 2: Mia Perez, DOB 2015-06-01, K7745216", "K7745216"),
        ("checking in online, it asks for my number, it's K7745216", "K7745216"),
        ("Her travel ID is K7745216.", "K7745216"),
        ("guest,doc,country\nJon Perez,K7745216,GB", "K7745216"),
        ("Booking XK4Q7P: traveller Jon Perez, K7745216, exp 2031", "K7745216"),
    ],
)
def test_a_data_page_labels_a_passport_without_the_word(text: str, value: str) -> None:
    assert value in _page_values(text)


@pytest.mark.parametrize(
    "text",
    [
        "Type P fuse, part 07KT11834, rated 14 A",  # a part word before the shape
        "lot 07KT11834, type: refund, code: NOR-2033",  # labels, but not a data page's
        "Type: P\n\nNumber: K7745216",  # a blank line ends the record
        "Type: P\nStock no: 548213307\nQty: 4",  # digits under another thing's number
        "Tyre type: P (passenger), load index 91, stock no 55012873",
        "grade,type,count\nA,P,12345678",  # type P, but the digits are a count
        "type,number,qty\nD,40012345,3",  # another type's number
        "Date of birth field is optional on form F1020304 since the last release.",  # no date
        "born in 1985 in Leeds; the laptop needs update KB5034441 installed",  # a year alone
        "Type: P\nthe build server logs from this morning are attached to the ticket here\n"
        "Number: K7745216",  # a long line is no form's field
    ],
)
def test_a_shape_beside_other_labels_is_left(text: str) -> None:
    assert _page_values(text) == set()


@pytest.mark.parametrize(
    ("record", "kind"),
    [
        ('{"doc_type": "P", "doc_no": "X0D4R2PL9", "issuing_country": "NOR"}', "PASSPORT"),
        ('{"id_doc": {"type": "national_id", "number": "X0D4R2PL9"}}', "PASSPORT"),
        ("doc_type,doc_no,issuing_state\nPO,X0D4R2PL9,NOR", "PASSPORT"),  # ICAO's official one
        ('{"document": {"type": "delivery_note", "number": "X0D4R2PL9"}}', None),
        ('{"doc_type": "quote", "doc_no": "X0D4R2PL9", "issuing_country": "NOR"}', None),
        ("doc_type,doc_no,issuing_state\nSO,X0D4R2PL9,NOR", None),  # a sales order's code
    ],
)
def test_a_record_s_own_type_says_whether_its_number_is_a_document_s(
    record: str, kind: str | None
) -> None:
    number = next(f for f in scan(record).fields if f.value == "X0D4R2PL9")
    assert field_type(number) == kind


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("the app shows error code 4155550199 on start", False),
        ("use promo code 2125550147 at checkout", False),
        ("my area code is 415, the full number 4155550199", True),
    ],
)
def test_a_code_s_number_is_no_phone(text: str, kept: bool) -> None:
    phone = text.index("4155550199") if "4155550199" in text else text.index("2125550147")
    found = [RecognizerResult("PHONE_NUMBER", phone, phone + 10, 0.6)]
    assert bool(drop_references(text, found)) == kept


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("PPT #: GB5512039 (exp 11/31)", {"GB5512039"}),
        ("pp nr X0D4R2PL9, nationality NOR", {"X0D4R2PL9"}),
        ("p/p: 31874592, Norwegian", {"31874592"}),
        ("read pp 214-229 before Monday", set()),  # pages
        ("PPT: Q3_review_v7.pptx, slide 12 has the 2024 figures", set()),  # slides
        ("pp 12, lines 4 to 9, then order DN5531208", set()),  # a shape, but far from it
    ],
)
def test_the_word_s_short_forms_take_a_passport_s_shape_right_after_them(
    text: str, found: set[str]
) -> None:
    assert _rule_values(text) == found


@pytest.mark.parametrize(
    ("record", "taken"),
    [
        ('{"traveller": "Jon", "ppt": "GB5512039"}', True),
        ('{"traveller": "Jon", "ppt": "Q3_review_v7.pptx"}', False),  # a slide deck's file
        ('{"traveller": "Jon", "passport": "scan_0412.pdf"}', False),
    ],
)
def test_an_abbreviated_passport_key_takes_a_number_but_no_file(record: str, taken: bool) -> None:
    value = list(json.loads(record).values())[-1]
    field = next(f for f in scan(record).fields if f.value == value)
    assert field_type(field) == "PASSPORT"
    assert valid_value("PASSPORT", field.value) == taken


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("the passport is in the name of Anna Weber, number 548213307", "548213307"),
        ("I lost my passport last week. The replacement is 548213307.", "548213307"),
        ("passport got damaged :( replacement C01X00T47 should arrive friday", "C01X00T47"),
        ("Passport on file is wrong. Number 548213307, issued 2024.", "548213307"),
    ],
)
def test_in_a_text_about_a_passport_a_number_or_its_replacement_is_one(
    text: str, value: str
) -> None:
    assert value in _rule_values(text)


@pytest.mark.parametrize(
    "text",
    [
        # a word before "number" says whose number it is
        "I lost my passport. The embassy's phone number is on their site, my booking number is 548213307.",
        "My passport was stolen, the police report number is 20240511, case closed.",
        "The passport is fine. Replacement part number for the charger is 548213307.",
    ],
)
def test_a_number_another_word_names_is_not_the_passport(text: str) -> None:
    assert not _rule_values(text)
