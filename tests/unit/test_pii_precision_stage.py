"""The precision side of issue 53: teams and greetings that sign or open a message where a
name would, chat speaker labels read as record keys, a phone finding inside a reference
number, and an organisation's acronym where a name would stand; while the people beside them
are still found."""

from __future__ import annotations

from tasks.pii.filters import not_a_name
from tasks.pii.generic.fields import name_value


def test_a_team_or_greeting_where_a_name_would_be_is_no_name_and_a_person_still_is() -> None:
    for span in ("Accounts Payable", "The Logistics Team", "Warehouse", "Billing\nTo", "Good"):
        assert not_a_name(span), span
    for span in ("Doris Day", "Mr Sales", "Gareth Pryce", "Warehouse Wanjiru"):
        assert not not_a_name(span), span


def test_a_chat_turn_after_user_or_agent_is_not_read_as_their_name() -> None:
    assert not name_value("my Galaxy Buds won't pair", strong=False)
    assert not name_value("the Apple Watch Ultra strap snapped", strong=False)
    assert name_value("Kwame Asante", strong=False)
    assert name_value("kwame asante", strong=True)
    assert name_value("Maria de la Cruz", strong=False)


def test_a_value_spelled_out_after_it_is_part_of_it_and_initials_are_not_a_spelling() -> None:
    from tasks.pii.filters import spelled_until

    text = "my surname is Mbeki, M as in Mike, B E K I, thanks"
    end = text.index("Mbeki") + len("Mbeki")
    assert text[: spelled_until(text, end)].endswith("B E K I")
    three = "it's Adaeze, A D A E Z E"
    assert spelled_until(three, three.index(",")) == len(three)
    initials = "signed Tom B. and Ann K."  # two capitals are initials, not a spelling
    assert spelled_until(initials, initials.index(" B.")) == initials.index(" B.")


def test_an_organisations_acronym_where_a_name_would_stand_is_no_name() -> None:
    from tasks.pii.filters import holds_acronym

    def held(text: str, span: str) -> bool:
        start = text.index(span)
        return holds_acronym(text, start, start + len(span))

    for text, span in (
        ("Carrier DHL, waybill 4471", "Carrier DHL"),
        ("Thanks,\nHSBC Fraud Team", "HSBC Fraud Team"),
        ("Regards, KPMG", "KPMG"),
    ):
        assert held(text, span), span
    # names written in capitals, a vowel-less surname, a title, a nationality, a field's label
    for text, span in (
        ("FOLASADE ADEBAYO called", "FOLASADE ADEBAYO"),
        ("Best,\nTom NG", "Tom NG"),
        ('{"pax": "SMITH/JOHN MR"}', "SMITH/JOHN MR"),
        ("Emma Jansen NLD", "Emma Jansen NLD"),
        ("Patient Evelyn Marsh MRN: 00482913", "Evelyn Marsh MRN"),
    ):
        assert not held(text, span), span


def test_a_model_after_its_makers_name_is_a_product_and_a_person_named_alike_is_not() -> None:
    from tasks.pii.filters import model_name

    def product(text: str, span: str) -> bool:
        start = text.index(span)
        return model_name(text, start, start + len(span)) is not None

    assert product("my Renault Zoe won't charge", "Zoe")  # the maker before the finding
    assert product("Mercedes Sprinter van, reg on file", "Mercedes Sprinter")  # or first in it
    assert product("Asus Vivobook won't boot", "Asus Vivobook")
    assert not product("Mercedes Garcia called about the lease", "Mercedes Garcia")
    assert not product("Driver: Kia Johnson, vehicle: Kia Sportage", "Kia Johnson")
    assert not product("Seat Mrs Lopez by the window", "Mrs Lopez")
    assert not product("From: Keiko Honda", "Keiko Honda")  # the maker's name last: a surname
    # a customer record's name column (a planted canary, "Mercedes Vallés", survived a curate
    # run under it); a product sheet's model column stays a model
    record = "order_id,name,email,dob\n136059,Mercedes Vallés,anna40@example.net,17.01.1980\n"
    assert not product(record, "Mercedes Vallés")
    assert product("model,maker,price\nMercedes Sprinter 316,Mercedes,41000\n", "Mercedes Sprinter")
    assert product("name,price,stock\nMercedes Sprinter,41000,3\n", "Mercedes Sprinter")
    # a role's word before the name (a planted canary, "the customer Morgan O'Hurley")
    assert not product("check the order for the customer Morgan O'Hurley", "Morgan O'Hurley")
    # a JSON tool result's name under a person's parent (a planted canary, "Morgan O'Gowan",
    # FLYWHEEL_CURATE__CANARY_SEED=7294715222920712284) or a markup element beside a phone; a
    # product record's name and a key=value model stay models
    shipped = '{"ship_to": {"name": "Morgan O\'Gowan"}, "email": "x@example.org"}'
    assert not product(shipped, "Morgan O'Gowan")
    driver = "<driver><name>Mercedes Vallés</name><phone>555-0100</phone></driver>"
    assert not product(driver, "Mercedes Vallés")
    assert product('{"product": {"name": "Morgan Plus Four", "price": 89000}}', "Morgan Plus")
    assert product("model=Morgan Plus Four price=89000", "Morgan Plus Four")
