"""Structure-aware detection without the spaCy pipeline: JSON anywhere in a text (embedded,
nested, encoded again inside a string), CSV and pipe tables, key=value records; which fields
are personal; findings cut to cells so the structure stays valid; names carried to every
occurrence; references that are not phone or card numbers; secrets and passports the
free-text rules missed."""

from __future__ import annotations

import json

import pytest

from tasks.pii.generic.fields import Field, field_type, norm_key, valid_value
from tasks.pii.generic.identifiers import RULES
from tasks.pii.generic.json_scan import json_docs
from tasks.pii.generic.secrets import secret_spans
from tasks.pii.generic.structured import clip, forced_spans, propagated_names, scan
from tasks.pii.names.cues import caps_name_spans, cued_name_spans


def _forced(text: str) -> dict[str, str]:
    """value -> label of every personal field ``scan`` finds in ``text``."""
    return {text[s:e]: label for s, e, label, _bare in forced_spans(text, scan(text))}


def _replace(text: str, spans: list[tuple[int, int, bool]], new: str = "<X>") -> str:
    for start, end, quoted in sorted(spans, reverse=True):
        text = text[:start] + (json.dumps(new) if quoted else new) + text[end:]
    return text


def test_json_after_a_prompt_is_parsed_with_its_key_paths() -> None:
    text = 'get_customer(5521) -> {"id": 5521, "ship_to": {"name": "Ana Souza", "line1": "48 Fenwick Road"}} ok'
    [doc] = list(json_docs(text))
    assert text[doc.start : doc.end].startswith("{") and text[doc.end :] == " ok"
    paths = {v.path: v.text for v in doc.values}
    assert paths[("ship_to", "name")] == "Ana Souza" and paths[("id",)] == "5521"
    assert _forced(text) == {"Ana Souza": "PERSON", "48 Fenwick Road": "ADDRESS"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"fullName": "Rebecca Hale", "dateOfBirth": "1948-02-11"}',
            {"Rebecca Hale": "PERSON", "1948-02-11": "DATE_OF_BIRTH"},
        ),
        (
            '{"passengers": [{"first_name": "Tomás", "passport": "PAB482913"}]}',
            {"Tomás": "PERSON", "PAB482913": "PASSPORT"},
        ),
        (
            '{"documents": {"passport": {"number": "X9921834", "country": "IE"}}}',
            {"X9921834": "PASSPORT"},
        ),
        (
            '{"contact": "Imani Brooks", "phone": 4155550123}',
            {"Imani Brooks": "PERSON", "4155550123": "PHONE_NUMBER"},
        ),
        (
            '{"policy": {"insured": ["Desmond Achterberg", "Femke Achterberg"]}}',
            {"Desmond Achterberg": "PERSON", "Femke Achterberg": "PERSON"},
        ),
        ("{'passenger': 'nguyen van an', 'pnr': 'K2LMQ9'}", {"nguyen van an": "PERSON"}),
        (
            '{"user": {"displayName": "kwame asante", "contactInfo": {"emailAddress": "k@proton.me"}}}',
            {"kwame asante": "PERSON", "k@proton.me": "EMAIL_ADDRESS"},
        ),
        (
            '{"aws_secret_access_key": "q8Jt3vXo5Lr2Wn9Yd7Kc1Bm4Fh6Gs0Pa2Ze8Ui3", "region": "eu-west-1"}',
            {"q8Jt3vXo5Lr2Wn9Yd7Kc1Bm4Fh6Gs0Pa2Ze8Ui3": "SECRET"},
        ),
        (
            '{"Hospital Number": "RJ1 449 2071", "Name": "Gerald Pinkney"}',
            {"RJ1 449 2071": "MEDICAL_ID", "Gerald Pinkney": "PERSON"},
        ),
    ],
)
def test_a_value_under_a_personal_field_is_found(text: str, expected: dict[str, str]) -> None:
    assert _forced(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"items": [{"name": "Logitech MX Keys", "sku": "920-009294"}], "customer_id": "C-88213"}',
        '{"driver": "nvidia-535.129.03", "manager": "npm", "parent": "ORD-1", "child_count": 2}',
        '{"contact_method": "email", "contact": "phone", "owner": "payments-team"}',
        '{"store": {"name": "Brighton Marina", "phone_ext": "204"}, "passenger_count": 2}',
        '{"name": "Priority shipping", "carrier": "FedEx", "address_verified": true}',
        '{"card": "**** 4242", "ssn": "***-**-1234", "next_page_token": "CAEQAA", "email": null}',
        "sku,name,stock,price\n4471-221-09,USB-C Hub 7-in-1,42,39.99",
    ],
)
def test_things_named_like_people_are_not_personal_fields(text: str) -> None:
    assert _forced(text) == {}


def test_json_encoded_inside_a_string_is_read_and_mapped_back_to_the_raw_text() -> None:
    text = 'tool_output: "{\\"customer\\": \\"Priyanka Deshmukh\\", \\"dob\\": \\"04.11.1990\\"}"'
    assert _forced(text) == {"Priyanka Deshmukh": "PERSON", "04.11.1990": "DATE_OF_BIRTH"}
    nested = '{"result": "ok", "record": "{\\"patient_name\\": \\"Eleanor Voss\\", \\"mrn\\": \\"00731552\\"}"}'
    assert _forced(nested) == {"Eleanor Voss": "PERSON", "00731552": "MEDICAL_ID"}


def test_csv_markdown_and_database_tables_key_their_cells_by_the_header() -> None:
    csv = '"last_name","first_name","phone"\n"O\'Donnell","Maeve","(312) 555-0178"'
    assert _forced(csv) == {
        "O'Donnell": "PERSON",
        "Maeve": "PERSON",
        "(312) 555-0178": "PHONE_NUMBER",
    }
    md = "| Child | Parent | Parent phone |\n| --- | --- | --- |\n| Milo Haverford | Celia Haverford | 555-0134 |"
    assert _forced(md) == {
        "Milo Haverford": "PERSON",
        "Celia Haverford": "PERSON",
        "555-0134": "PHONE_NUMBER",
    }
    db = "+----+-------------+\n| id | full_name   |\n+----+-------------+\n| 17 | Yusuf Demir |\n+----+-------------+"
    assert _forced(db) == {"Yusuf Demir": "PERSON"}


def test_key_value_records_and_form_lines() -> None:
    crm = "crm.lookup -> customer=Declan Furlong tier=gold dob=12.04.1986 last_order=ORD-55812"
    assert _forced(crm) == {"Declan Furlong": "PERSON", "12.04.1986": "DATE_OF_BIRTH"}
    query = "first_name=Siddharth&last_name=Rao&ssn=501-22-7813"
    assert _forced(query) == {"Siddharth": "PERSON", "Rao": "PERSON", "501-22-7813": "US_SSN"}
    form = "emergency_contact: Jonas Krüger (+49 170 5558812)\nstart_date: 2021-09-01"
    assert _forced(form) == {"Jonas Krüger": "PERSON"}


def test_a_finding_is_cut_to_cells_so_json_stays_json_with_the_same_keys() -> None:
    text = (
        '{"address": "742 Evergreen Terrace", "city": "Springfield", "n": 12, "note": "Zo\\u00eb"}'
    )
    regions = scan(text).regions
    whole = (text.index("742"), text.index("Springfield") + len("Springfield"))  # across keys
    into_escape = (text.index("Zo"), text.index("Zo") + 4)  # ends inside \u00eb
    bare = (text.index("12"), text.index("12") + 2)
    pieces = [p for span in (whole, into_escape, bare) for p in clip(*span, regions)]
    out = json.loads(_replace(text, pieces))
    assert list(out) == ["address", "city", "n", "note"]
    assert out == {"address": "<X>", "city": "<X>", "n": "<X>", "note": "<X>"}


def test_a_finding_across_csv_columns_keeps_every_column() -> None:
    text = "name,street,city\nOwen Price,12 Baker Street,London"
    start = text.index("Owen")
    pieces = clip(start, len(text), scan(text).regions)
    rows = [line.split(",") for line in _replace(text, pieces).split("\n")]
    assert rows == [["name", "street", "city"], ["<X>", "<X>", "<X>"]]


def test_a_name_found_once_is_carried_to_a_surname_or_given_name_alone() -> None:
    text = "I spoke with Eamon Callaghan. CALLAGHAN promised it; eamon? the price of it, Price"
    found = {text[s:e] for s, e in propagated_names(text, [(13, 28)])}
    assert found == {"Eamon", "Callaghan", "CALLAGHAN"}  # not lower case: it was capitalised
    lower = "hi its tomasz wozniak. Tomasz here again"
    assert {lower[s:e] for s, e in propagated_names(lower, [(7, 21)])} >= {"tomasz", "Tomasz"}
    keyed = '{"Mbeki": 3, "name": "Grace Mbeki"} Mbeki'
    keys = [k for r in scan(keyed).regions for k in r.keys]
    spans = propagated_names(keyed, [(keyed.index("Grace"), keyed.index("Grace") + 11)], keys)
    assert [keyed[s:e] for s, e in spans] == ["Mbeki", "Mbeki"]  # the value and the free text
    assert (2, 7) not in spans  # never the key


def test_names_in_capitals_and_airline_order_without_the_model() -> None:
    text = "PLEASE CALL BERNADETTE VOSS ABOUT THE DAMAGED SOFA"
    assert [text[s:e] for s, e in caps_name_spans(text)] == ["BERNADETTE VOSS"]
    assert caps_name_spans("PLEASE CALL ABOUT THE DAMAGED SOFA TODAY") == []
    airline = "ticket was issued to Dupont/Marie, and/or Input/Output"
    assert [airline[s:e] for s, e in cued_name_spans(airline, None)] == ["Dupont/Marie"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("my old number was C01X00T47, the new passport number is C5M8RT2K1", "C01X00T47"),
        ("passport changed - old number K2211830, new one K7745216", "K7745216"),
        ("they asked for the passport, mine is LX4921837", "LX4921837"),
        # ICAO's nine characters, with as few as one digit (Dutch, German document numbers)
        ("is a passport needed? mine is NWKR8HQDT, I'm Dutch", "NWKR8HQDT"),
        ("passport renewed in Berlin, my number is CFXJ7LRT2", "CFXJ7LRT2"),
    ],
)
def test_a_passport_after_number_or_mine_is_in_a_text_about_a_passport(
    text: str, value: str
) -> None:
    found = {text[s:e] for r in RULES if r.entity == "PASSPORT" for s, e in r.spans(text)}
    assert value in found


@pytest.mark.parametrize(
    "text",
    [
        "the passport office said mine is READY, no number yet",  # no digit
        "passport fine, mine is LUFTHANSA1 no wait the flight is LH401",  # ten characters
        "passport photo booth: my number is tkrwqbm7z in the queue",  # not capitals
    ],
)
def test_no_icao_number_without_its_shape(text: str) -> None:
    assert not [text[s:e] for r in RULES if r.entity == "PASSPORT" for s, e in r.spans(text)]


def test_hospital_numbers_after_their_cue() -> None:
    rule = next(r for r in RULES if r.entity == "MEDICAL_ID")
    for text, value in [
        ("hospital number RN7 420 1189, discharged", "RN7 420 1189"),
        ("my hospital no. is K0551287", "K0551287"),
        ("hosp # 440918273 for my dad", "440918273"),
    ]:
        assert [text[s:e] for s, e in rule.spans(text)] == [value]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "keys: AKIAQ3EGTW2NRL7JXP4M Vx9q2LmP4rT7wZ1aB6cD8eF0gH3jK5nQ2sU4yW6z",
            "Vx9q2LmP4rT7wZ1aB6cD8eF0gH3jK5nQ2sU4yW6z",
        ),
        ("the new one is kettle-Marsh-91, please don't share it", "kettle-Marsh-91"),
        ("ok the new one: Orchid$2025 thx", "Orchid$2025"),
        ("temp pw was Bluebird!42 but it expired", "Bluebird!42"),
    ],
)
def test_secrets_without_the_word_password(text: str, secret: str) -> None:
    assert secret in {text[s:e] for s, e in secret_spans(text)}


@pytest.mark.parametrize(
    "text",
    [
        "gift card PIN 4821, balance says $0",
        "the voucher pin is 7730 and the code is GIFT-2291-XQ",
        "the new one is a Pixel 8, the old one was a Pixel 6a",
        "the new one: same size, just the other colour",
        "build hash 9f8e7d6c5b4a39281706f5e4d3c2b1a098765432 failed",  # 40 chars, no key id
    ],
)
def test_what_is_not_a_secret(text: str) -> None:
    assert list(secret_spans(text)) == []


def test_keys_are_normalised_and_fields_typed_by_parent_and_siblings() -> None:
    assert (
        norm_key("dateOfBirth") == "date_of_birth"
        and norm_key("Hospital Number") == "hospital_number"
    )
    person = Field(("booking", "passengers", "name"), frozenset({"name", "seat"}), 0, 1, "Li Wei")
    product = Field(("items", "name"), frozenset({"name", "sku"}), 0, 1, "Li Wei Tea")
    assert field_type(person) == "PERSON" and field_type(product) is None
    assert valid_value("PHONE_NUMBER", "4155550123", bare=True)
    assert not valid_value("PERSON", "C-10293") and not valid_value("PERSON", "n/a")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Passport number: 548213307 which I renewed last year", "548213307"),
        ("Passport: 548213307 / GBR / exp 12/2030", "548213307"),
        ("Passport: 548213307, UK, valid until 2031", "548213307"),
        ("Driving licence: MORGA753116SM9IJ exp 2029 category B", "MORGA753116SM9IJ"),
        ("MRN: 00482913 seen at the clinic on Monday", "00482913"),
        ("IBAN: DE89 3704 0044 0532 0130 00 for the refund please", "DE89 3704 0044 0532 0130 00"),
        ("Email: anna.berg@example.com - work address, please use it", "anna.berg@example.com"),
        ("DOB: 14 March 1987 (so I'm 39 now)", "14 March 1987"),
        # where the value does not end where a code seems to, the whole text is the value
        ("Passport: X-1234-567/89 ok", "X-1234-567/89 ok"),
        ("Passport: No. 548213307 (new)", "No. 548213307 (new)"),
        ("Passport: C01X 00T4 7", "C01X 00T4 7"),
    ],
)
def test_a_field_value_ends_where_the_writer_goes_on(text: str, value: str) -> None:
    """The rest of the writer's line after a personal field's value is kept: a form line is
    not wiped from the value to its end."""
    assert list(_forced(text)) == [value]
