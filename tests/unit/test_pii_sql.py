"""Tool results written as SQL read as records: an ``INSERT``'s values named by its columns, a
``COPY``'s rows, a printed row beside the ``SELECT`` that named its columns; judged as a JSON
record's fields are. On the precision side: products, orders, flags and DDL in the same SQL
keep their values; and no name or place is replaced with the quotation marks around it.
Statements written for this test, none from the corpora."""

from __future__ import annotations

import pytest
from presidio_analyzer import RecognizerResult

from tasks.pii.filters import precision_filter
from tasks.pii.generic.fields import field_type
from tasks.pii.generic.sql import sql
from tasks.pii.generic.structured import apply_structure, scan

ENTITIES = ("PERSON", "PASSPORT", "DATE_OF_BIRTH", "PHONE_NUMBER", "EMAIL_ADDRESS", "SECRET")


def _personal(text: str) -> dict[str, str]:
    return {f.value: label for f in scan(text).fields if (label := field_type(f))}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "INSERT INTO guests (guest_name, passport_no, birth_date) "
            "VALUES ('Piotr Nowak', 'EA4417093', '1971-06-30');",
            {"Piotr Nowak": "PERSON", "EA4417093": "PASSPORT", "1971-06-30": "DATE_OF_BIRTH"},
        ),
        (  # two rows, an escaped quote in a name, quoted identifiers, a schema
            'insert into public."Patients"("surname", "phone") values '
            "('O''Neill', '+353 87 123 4567'), ('Byrne', '+353 86 765 4321')",
            {
                "O'Neill": "PERSON",
                "+353 87 123 4567": "PHONE_NUMBER",
                "Byrne": "PERSON",
                "+353 86 765 4321": "PHONE_NUMBER",
            },
        ),
        (
            "COPY staff (full_name, email) FROM stdin;\nMarta Kowalska\tm.kowalska@example.pl\n\\.",
            {"Marta Kowalska": "PERSON", "m.kowalska@example.pl": "EMAIL_ADDRESS"},
        ),
        (
            "row: ('Piotr Nowak', 'EA4417093') from SELECT holder_name, passport_no FROM visas",
            {"Piotr Nowak": "PERSON", "EA4417093": "PASSPORT"},
        ),
        (
            "INSERT INTO accounts (login, password) VALUES ('pnowak', 'Zebra#Crossing77')",
            {"Zebra#Crossing77": "SECRET"},
        ),
    ],
)
def test_sql_values_are_judged_by_their_columns(text: str, expected: dict[str, str]) -> None:
    assert _personal(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "INSERT INTO products (sku, name, country) VALUES ('EA4417093', 'Desk lamp', 'POL');",
        "insert into flags(name, enabled) values ('beta_search', true), ('new_cart', false)",
        "CREATE TABLE guests (guest_name text, passport_no varchar(9), birth_date date);",
        "COPY parts (sku, name) FROM stdin;\nEA4417093\tHinge\n\\.",
        "row: ('QX7R2D', 'confirmed') from SELECT pnr, status FROM bookings",
    ],
)
def test_records_of_things_have_no_personal_field(text: str) -> None:
    assert _personal(text) == {}


def test_a_quote_that_never_closes_ends_the_statement_and_costs_one_pass() -> None:
    text = "INSERT INTO t (a, b) VALUES ('x', '" + "y" * 200_000
    regions, fields = sql(text)
    assert len(regions) == 1 and regions[0].end == len(text)
    assert [f.value for f in fields][:1] == ["x"]


def test_a_finding_over_a_value_s_quote_is_cut_to_the_value() -> None:
    text = "INSERT INTO guests (guest_name, ward) VALUES ('Piotr Nowak', 'B2');"
    start = text.index("Piotr")
    whole = RecognizerResult("PERSON", start, start + len("Piotr Nowak'"), 0.6)
    kept = apply_structure(text, [whole], ENTITIES)
    assert {text[r.start : r.end] for r in kept} == {"Piotr Nowak"}


@pytest.mark.parametrize(
    ("text", "taken"),
    [
        ("... WHERE surname = 'Haddad'; -> 1 row", "Haddad'"),
        ("VALUES (12, 'Marta Nowak', 'x')", "'Marta Nowak'"),
        ("James' order shipped", "James'"),
    ],
)
def test_a_name_never_takes_the_quotation_marks_around_it(text: str, taken: str) -> None:
    start = text.index(taken)
    found = precision_filter(text, [RecognizerResult("PERSON", start, start + len(taken), 0.6)])
    assert [text[r.start : r.end] for r in found] == [taken.strip("'")]
