"""Korean as a first-class language and the English gaps of issue 17, measured on held-out
support-ticket corpora generated with Faker at test time (tests/data/support_corpus.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from infra.errors import MissingDependencyError
from infra.settings import CurateSettings
from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine
from tests.data import support_corpus as sc

pytestmark = pytest.mark.integration

KO_STRUCTURED = ("RRN", "PHONE", "CARD", "EMAIL", "ACCOUNT", "BRN")


def _recall(corpus, gone) -> dict[str, float]:  # type: ignore[no-untyped-def]
    engine = load_engine(PiiConfig.from_settings(CurateSettings()))
    redacted = anonymize_texts(engine, [c.text for c in corpus])
    total, removed = Counter(), Counter()
    for item, red in zip(corpus, redacted, strict=True):
        for kind, value in item.labels:
            total[kind] += 1
            removed[kind] += gone(kind, value, red.text)
    return {kind: removed[kind] / total[kind] for kind in total}


@pytest.mark.parametrize("family", ["dev", "heldout"])
def test_korean_tickets_lose_every_identifier_and_most_names(family: str) -> None:
    recall = _recall(sc.korean(200, seed=23, family=family), sc.ko_value_gone)
    assert all(recall[k] == 1.0 for k in KO_STRUCTURED), recall
    assert recall["PERSON"] >= 0.9 and recall["ADDRESS"] >= 0.9, recall


@pytest.mark.parametrize("family", ["dev", "heldout"])
def test_english_gaps_lower_case_names_nino_and_odd_phones(family: str) -> None:
    recall = _recall(sc.english_gaps(200, seed=29, family=family), sc.en_value_gone)
    assert recall["NINO"] == 1.0 and recall["PHONE"] == 1.0, recall
    assert recall["PERSON"] >= 0.95, recall


def test_ordinary_korean_and_english_words_stay() -> None:
    engine = load_engine(PiiConfig.from_settings(CurateSettings()))
    texts = [
        *sc.KO_ORDINARY,
        *sc.KO_QUESTIONS,
        "안녕하세요, 연말정산 서류 문의드립니다.",
        "hi there, thanks so much!",
        "hey its me again, still locked out",
    ]
    out = anonymize_texts(engine, texts)
    assert [r.text for r in out] == texts


def test_mixed_korean_english_text_runs_both_pipelines() -> None:
    engine = load_engine(PiiConfig.from_settings(CurateSettings()))
    text = "안녕하세요, 저는 김상호입니다. My colleague Jane Roe (jane@example.org) will call 010-2345-6789."
    red = anonymize_texts(engine, [text])[0]
    for value in ("김상호", "Jane", "Roe", "jane@example.org", "2345"):
        assert value not in red.text, red.text
    assert red.text.startswith("안녕하세요")


def test_glued_particles_and_masked_rrn() -> None:
    engine = load_engine(PiiConfig.from_settings(CurateSettings()))
    texts = [
        "김상호이고 주민번호는 840512-1******입니다",
        "배은지입니다. 계좌 110-123-456789로 보내주세요",
    ]
    out = [r.text for r in anonymize_texts(engine, texts)]
    assert out[0] == "<PERSON>이고 주민번호는 <KR_RRN>입니다", out
    assert out[1].startswith("<PERSON>입니다. 계좌 <") and out[1].endswith(">로 보내주세요"), out
    assert "456789" not in out[1]


def test_service_lines_and_order_numbers_stay_and_the_orderers_phone_goes() -> None:
    engine = load_engine(PiiConfig.from_settings(CurateSettings()))
    clean = [
        "AS 접수는 1600-7788 로 해주세요",  # Latin letters: the English pipeline runs too
        "대표전화 1644-8282 말고 다른 번호는 없나요?",
        "광고 문자 무료수신거부 080-870-1234 눌렀는데 또 와요",
        "CJ대한통운 송장 567812349012 조회가 안 돼요",
        "2024061298765 주문 건 환불 처리됐는지 확인해주세요",
        "1588-3366",
    ]
    out = anonymize_texts(engine, [*clean, "주문자 연락처 010-2345-6789 입니다"])
    assert [r.text for r in out[:-1]] == clean
    assert out[-1].text == "주문자 연락처 <PHONE_NUMBER> 입니다"


def test_a_name_in_a_tool_result_goes_everywhere_in_the_text() -> None:
    engine = load_engine(PiiConfig.from_settings(CurateSettings()))
    text = '조회 결과 {"customer": "최하린", "tier": "gold"} 하린이 폰이 고장났대요'
    red = anonymize_texts(engine, [text])[0].text
    assert "하린" not in red and red.endswith("<PERSON>이 폰이 고장났대요"), red
    assert '"tier": "gold"' in red


def test_missing_korean_pipeline_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from tasks.pii import korean

    real_import = builtins.__import__

    def no_kiwi(name, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name.startswith("kiwipiepy"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    korean.load_kiwi.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_kiwi)
    try:
        with pytest.raises(MissingDependencyError, match="kiwipiepy"):
            load_engine(PiiConfig.from_settings(CurateSettings(score_threshold=0.36)))
    finally:
        monkeypatch.undo()
        korean.load_kiwi.cache_clear()


@pytest.mark.parametrize(
    ("entities", "kept", "gone"),
    [
        # Korean-only types: the English pipeline, which has none of them, must not run all
        (["KR_CAR_PLATE", "ADDRESS"], ["김민수", "010-1234-5678", "Jane Roe"], ["12가3456"]),
        # a date after a name is a date of birth only when dates of birth are configured
        (["PERSON"], ["1984.05.12", "010-1234-5678", "12가3456"], ["김민수", "Jane Roe"]),
    ],
)
def test_configured_entities_limit_both_languages(
    entities: list[str], kept: list[str], gone: list[str]
) -> None:
    settings = CurateSettings(entities=entities, custom_patterns={})
    engine = load_engine(PiiConfig.from_settings(settings))
    text = (
        "김민수 1984.05.12 고객님 차량 12가3456, 전화 010-1234-5678, 주소 서울 강남구 "
        "테헤란로 123. My colleague Jane Roe will call."
    )
    red = anonymize_texts(engine, [text])[0]
    assert set(red.entities) <= {*entities, "LOCATION"}, red.text
    assert all(v in red.text for v in kept) and not any(v in red.text for v in gone), red.text
