"""PII helpers that need no spaCy pipeline: configuration, the missing-pipeline error, the
Luhn check, span merging and the k-anonymity pattern."""

from __future__ import annotations

import pytest

from infra.errors import MissingDependencyError
from infra.settings import CurateSettings
from tasks.curate.kanon import placeholder_pattern
from tasks.pii.engine import PiiConfig, _merge_spans, load_spacy
from tasks.pii.generic.contact import luhn_ok


def test_config_from_settings_is_hashable_and_carries_custom_patterns() -> None:
    settings = CurateSettings(custom_patterns={"MEMBER_ID": r"\bM-\d{6}\b"}, operator="mask")
    config = PiiConfig.from_settings(settings)
    assert hash(config) == hash(PiiConfig.from_settings(settings))  # the engine cache key
    assert "MEMBER_ID" in config.entities and config.operator == "mask"
    assert dict(config.custom_patterns) == {"MEMBER_ID": r"\bM-\d{6}\b"}


def test_missing_pipeline_names_the_pip_package() -> None:
    with pytest.raises(MissingDependencyError, match="pip install xx-core-web-missing"):
        load_spacy("xx_core_web_missing")


def test_luhn() -> None:
    assert luhn_ok("4111 1111 1111 1111") and luhn_ok("378282246310005")
    assert not luhn_ok("4111 1111 1111 1112")
    assert not luhn_ok("0000 0000 0")  # too short to be a card


def test_overlapping_findings_merge_into_the_longest() -> None:
    spans = [(10, 20, "PERSON"), (12, 30, "LOCATION"), (40, 45, "EMAIL_ADDRESS")]
    assert _merge_spans(spans) == [(10, 30, "LOCATION"), (40, 45, "EMAIL_ADDRESS")]


def test_pattern_replaces_entities_and_numbers_and_normalises() -> None:
    def span(text: str, name: str) -> list[tuple[int, int, str]]:
        return [(text.index(name), text.index(name) + len(name), "PERSON")]

    text = "Hi, I'm  Jane Roe. What is 23 + 58?"
    pattern = placeholder_pattern(text, span(text, "Jane Roe"))
    assert pattern == "hi, i'm <PERSON>. what is <NUM> + <NUM>"
    other = "HI, I'M John Smith-Jones.   What is 7 + 1234?"
    assert placeholder_pattern(other, span(other, "John Smith-Jones")) == pattern


def test_a_process_that_loads_the_engine_skips_hugging_faces_pipelines() -> None:
    """Each curate or release run started as a process loads the engine; Presidio's optional
    Hugging Face NER engine (never used here) would import ``transformers.pipelines`` there:
    about 2 CPU-s a process. The engine still finds a name, and the pipelines still import
    afterwards for whoever needs them."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from infra.settings import CurateSettings\n"
        "from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine\n"
        "config = PiiConfig.from_settings(CurateSettings(languages=['en']))\n"
        "text = anonymize_texts(load_engine(config), ['Please ask for Maria Gonzalez.'])[0].text\n"
        "print(text, 'transformers.pipelines' in sys.modules)\n"
        "from transformers import pipeline\n"
        "print(callable(pipeline))\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["Please ask for <PERSON>. False", "True"], done.stdout
