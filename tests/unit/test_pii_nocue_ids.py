"""Structured identifiers people type without the usual cue word right before them (issue 53):
passwords given to command lines and config files, UK driving licences by their shape,
licence and passport numbers a clause after the document word, national identity cards; and
what must stay: ports, placeholders, files, product and order numbers."""

from __future__ import annotations

import regex as re

from tasks.pii.generic.fields import valid_value
from tasks.pii.generic.identifiers import RULES
from tasks.pii.generic.secrets import secret_spans
from tasks.pii.generic.shapes import SHAPES


def _secrets(text: str) -> list[str]:
    return [text[s:e] for s, e in secret_spans(text)]


def _ids(entity: str, text: str) -> list[str]:
    """The values the ``entity`` rules find, each span once (two rules may find one)."""
    spans = [span for rule in RULES if rule.entity == entity for span in rule.spans(text)]
    return [text[s:e] for s, e in dict.fromkeys(spans)]


def test_a_password_given_as_a_flag_argument_or_in_a_config_file_is_a_secret() -> None:
    assert _secrets("$ sshpass -p Rk7!vW2qLz ssh ops@bastion") == ["Rk7!vW2qLz"]
    assert _secrets("docker login registry.example.com -u deployer -p Gh5$mNq8Ztr2") == [
        "Gh5$mNq8Ztr2"
    ]
    assert _secrets("redis-cli -h cache.local -a p4ssRedis!77 ping") == ["p4ssRedis!77"]
    assert "Wint3r#Sql" in _secrets("mysqldump -uroot -p'Wint3r#Sql' shop > shop.sql")
    assert _secrets("htpasswd -b .htpasswd admin Adm1n-2291x") == ["Adm1n-2291x"]
    assert _secrets("define('DB_PASSWORD', 'Wp!db-7731kx');") == ["Wp!db-7731kx"]


def test_ports_paths_and_placeholders_after_the_same_flags_and_keys_stay() -> None:
    for text in (
        "ssh -p 2222 ops@bastion.internal",
        "redis-cli -h cache.local -p 6379 ping",
        "psql -h db -U app -p 5432 -d app",
        "docker login -u deployer --password-stdin < token.txt",
        "curl --token-file /run/secrets/api_token https://api.example.com",
        "POSTGRES_PASSWORD=${POSTGRES_PASSWORD}",
        'SECRET_KEY = os.environ["SECRET_KEY"]',
        "password = <set in vault>",
        "define('DB_PASSWORD', getenv('DB_PASSWORD'));",
    ):
        assert _secrets(text) == [], text
    assert not valid_value("SECRET", "${DB_PASS}")
    assert not valid_value("SECRET", 'os.environ["DB_PASS"]')
    assert valid_value("SECRET", "Spr1ng!Ds88")


def test_a_uk_driving_licence_is_found_by_its_shape_and_a_product_code_is_not() -> None:
    shape = next(regex for entity, regex, _s, _n in SHAPES if entity == "DRIVER_LICENSE")
    found = re.compile(shape)
    for licence in ("MORGA657054SM9IJ", "PATEL861027S99XY", "JONES 710238 AB9CD"):
        assert found.search(f"my licence is {licence} thanks"), licence
        assert found.search(f"uploaded it: {licence}"), licence
    # a month above 12 (and not a woman's 51-62) or a day above 31: no licence
    for code in ("ABCDE713054SM9IJ", "ABCDE701354SM9IJ", "SKU12345678AB9CD", "6ES7214-1AG40-0XB0"):
        assert not found.search(f"part {code} in stock"), code


def test_a_number_a_clause_after_the_document_word_is_that_document() -> None:
    assert _ids("DRIVER_LICENSE", "the licence I have on file for my husband is C4418203") == [
        "C4418203"
    ]
    assert _ids("DRIVER_LICENSE", "license for the second driver (my brother) -> TX 40918273") == [
        "TX 40918273"
    ]
    assert _ids("PASSPORT", "the passport I registered with last year was EB8812094, expired") == [
        "EB8812094"
    ]
    assert _ids("PASSPORT", "Her ID card is L01X00T47, German") == ["L01X00T47"]


def test_the_document_word_in_another_sentence_or_before_an_order_number_does_not_reach() -> None:
    for text in (
        "the license key for Office is on the receipt, order 112-5590234-8812210",
        "I renewed my passport last month. The booking is HX4R2P7",
        "the license plan is Business Premium, invoice INV-55219",
        "my passport is fine but the order number is A12345678",
        "software license v3.2.1 expired, ticket CS-88120",
    ):
        assert _ids("DRIVER_LICENSE", text) == [], text
        assert _ids("PASSPORT", text) == [], text
