"""The learned English name layer committed in models/pii-names-en: it loads from the
repository (no download), finds names the templates never held, leaves streets and
companies, is off by default and, switched on, is one more recogniser of the English engine
only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tasks.pii.ner.learned_names import MODEL_DIR, learned_name_spans, load_layer

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_layer_ships_in_the_repository_and_finds_names() -> None:
    assert (MODEL_DIR / "config.cfg").is_file()
    nlp = load_layer()
    text = "Ask Oluwaseun Adeyemi whether the invoice went out."
    assert [text[s:e] for s, e in learned_name_spans(nlp, text)] == ["Oluwaseun Adeyemi"]
    assert learned_name_spans(nlp, "How do I reset the router after the update?") == []


def test_off_by_default_and_on_only_for_english() -> None:
    from infra.settings import CurateSettings
    from tasks.pii.engine import PiiConfig
    from tasks.pii.registry import build_recognizers

    config = PiiConfig.from_settings(CurateSettings())
    assert config.learned_names is False
    names = {r.name for r in build_recognizers("en", {})}
    assert "LearnedNameRecognizer" not in names
    on = replace(config, learned_names=True)
    assert "LearnedNameRecognizer" in {
        r.name for r in build_recognizers("en", {}, learned_names=on.learned_names)
    }
    assert "LearnedNameRecognizer" not in {
        r.name for r in build_recognizers("ko", {}, learned_names=True)
    }


def test_the_engine_with_the_layer_on_removes_a_name() -> None:
    from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine

    engine = load_engine(PiiConfig(learned_names=True))
    [red] = anonymize_texts(engine, ["ok so Thandiwe Mokoena said the build is green"])
    assert "Thandiwe" not in red.text and "Mokoena" not in red.text
