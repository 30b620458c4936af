"""Tool results written as XML or HTML read as records: an element's text or an attribute is
a field named by its tag, its attribute, its table column's header or its definition's term,
and judged as a JSON record's field is. On the precision side: orders, invoices, build files
and product tables in the same markup keep their values, and a finding never lands in a tag.
Markup written for this test, none from the corpora."""

from __future__ import annotations

import pytest
from presidio_analyzer import RecognizerResult

from tasks.pii.generic.fields import field_type
from tasks.pii.generic.markup import markup
from tasks.pii.generic.structured import apply_structure, scan

ENTITIES = ("PERSON", "PASSPORT", "DATE_OF_BIRTH", "PHONE_NUMBER", "EMAIL_ADDRESS", "MEDICAL_ID")


def _personal(text: str) -> dict[str, str]:
    return {f.value: label for f in scan(text).fields if (label := field_type(f))}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "<Guest><GivenName>Marta</GivenName><Surname>Kowalska</Surname>"
            "<PassportNumber>EA4417093</PassportNumber></Guest>",
            {"Marta": "PERSON", "Kowalska": "PERSON", "EA4417093": "PASSPORT"},
        ),
        (  # OpenTravel's document element: its type is a code, its issuing country beside it
            '<Document DocID="XK2290417" DocType="2" DocIssueCountry="PL"/>',
            {"XK2290417": "PASSPORT"},
        ),
        (  # FHIR's patient: the name's parts as attributes
            '<Patient><name family="Nowak" given="Piotr"/><birthDate value="1971-06-30"/>'
            "</Patient>",
            {"Nowak": "PERSON", "Piotr": "PERSON", "1971-06-30": "DATE_OF_BIRTH"},
        ),
        (  # a table whose header sits in its own thead
            "<table><thead><tr><th>Guest</th><th>Phone</th></tr></thead><tbody>"
            "<tr><td>Marta Kowalska</td><td>+48 601 234 567</td></tr></tbody></table>",
            {"Marta Kowalska": "PERSON", "+48 601 234 567": "PHONE_NUMBER"},
        ),
        (
            "<dl><dt>Date of birth</dt><dd>30/06/1971</dd><dt>E-mail</dt>"
            "<dd>p.nowak@example.pl</dd></dl>",
            {"30/06/1971": "DATE_OF_BIRTH", "p.nowak@example.pl": "EMAIL_ADDRESS"},
        ),
        (
            '<form><input name="passport_no" value="EA4417093"><input name="qty" value="2">',
            {"EA4417093": "PASSPORT"},
        ),
        (
            '<record><field name="patient_id">PT-771204</field><field name="ward">B2</field>'
            "</record>",
            {"PT-771204": "MEDICAL_ID"},
        ),
    ],
)
def test_markup_fields_are_judged_by_their_names(text: str, expected: dict[str, str]) -> None:
    assert _personal(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "<Order><OrderNumber>SO7731902</OrderNumber><Carrier>UPS</Carrier></Order>",
        '<Document DocID="INV77319020" DocType="invoice" IssueDate="2025-02-01"/>',
        "<project><groupId>com.example</groupId><version>2.7.1</version></project>",
        "<table><tr><th>SKU</th><th>Item</th></tr><tr><td>EA4417093</td><td>Desk lamp</td></tr>"
        "</table>",
        '<input name="voucher" value="WINTER-25">',
        "Dear <PERSON>, your booking is confirmed.",  # a placeholder, not markup
    ],
)
def test_records_of_things_have_no_personal_field(text: str) -> None:
    assert _personal(text) == {}


def test_a_finding_across_tags_is_cut_to_the_text_and_never_touches_a_tag() -> None:
    text = "<p>Call <b>Marta Kowalska</b> on <i>+48 601 234 567</i></p>"
    whole = RecognizerResult("PERSON", text.index("Marta") - 3, text.index("</b>") + 4, 0.6)
    kept = apply_structure(text, [whole], ENTITIES)
    name = (text.index("Marta"), text.index("</b>"))
    assert kept and all(name[0] <= r.start and r.end <= name[1] for r in kept)
    assert "Marta Kowalska" in {text[r.start : r.end] for r in kept}


def test_a_number_under_a_code_attribute_is_no_phone() -> None:
    text = '<error code="4155550199">upstream timed out</error>'
    start = text.index("4155550199")
    phone = RecognizerResult("PHONE_NUMBER", start, start + 10, 0.6)
    assert apply_structure(text, [phone], ENTITIES) == []


def test_prose_with_inline_tags_keeps_its_findings() -> None:
    text = "<p>Hi, I'm <em>Piotr</em>, my number is 601 234 567.</p>"
    start = text.index("601")
    phone = RecognizerResult("PHONE_NUMBER", start, start + 11, 0.6)
    kept = apply_structure(text, [phone], ENTITIES)
    assert [text[r.start : r.end] for r in kept] == ["601 234 567"]


def test_text_without_closed_elements_is_no_markup() -> None:
    assert markup("if a <b and c> d then swap") == ([], [])
