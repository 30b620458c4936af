"""Nothing regresses silently: every labelled PII set in the repository (hand-written, sealed
held-out, Faker-generated) measured against the committed baseline
(``tests/data/pii_baseline.json``); a type's recall below it, or more PII-free texts altered,
fails and names the set and type (never a value or a line of a sealed set)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.data.pii_regression import BASELINE, FILE_SETS, regressions

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_no_labelled_set_regresses_against_the_committed_baseline() -> None:
    from tests.data.pii_regression import measure

    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    assert {str(p.relative_to(BASELINE.parent)) for p in FILE_SETS} <= set(baseline)
    assert regressions(baseline, measure()) == []


def test_a_drop_in_one_type_or_more_altered_text_is_named_and_a_gain_is_not() -> None:
    was = {
        "en": {"recall": {"PERSON": 0.96, "PHONE_NUMBER": 1.0}, "clean_altered_share": 0.02},
        "ko": {"recall": {"KR_RRN": 1.0}, "clean_altered_share": 0.0},
    }
    better = {
        "en": {"recall": {"PERSON": 0.99, "PHONE_NUMBER": 1.0}, "clean_altered_share": 0.0},
        "ko": {"recall": {"KR_RRN": 1.0, "PASSPORT": 0.5}, "clean_altered_share": 0.0},
    }
    assert regressions(was, better) == []
    worse = {
        "en": {"recall": {"PERSON": 0.99, "PHONE_NUMBER": 0.9778}, "clean_altered_share": 0.0},
        "ko": {"recall": {}, "clean_altered_share": 0.01},
    }
    assert regressions(was, worse) == [
        "en: PHONE_NUMBER recall 1.0 -> 0.9778",
        "ko: KR_RRN recall 1.0 -> missing",
        "ko: PII-free texts altered 0.0 -> 0.01",
    ]
    assert regressions(was, {"en": better["en"]}) == ["ko: in the baseline but no longer measured"]


def test_a_sealed_set_is_reported_in_totals_only(tmp_path: Path) -> None:
    from deployments.pii_eval_command import _text, evaluate_file

    lines = [
        {
            "text": "my passport is 548219673",
            "entities": [{"type": "PASSPORT", "value": "548219673"}],
        },
        {"text": "the vault combination", "entities": [{"type": "SECRET", "value": "combination"}]},
        {"text": "tracking 1Z999AA10123456784 says delivered", "entities": []},
    ]
    for folder in ("open", "sealed"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "set.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "sealed" / "SEALED").write_text("totals only\n")
    shown = evaluate_file(tmp_path / "open" / "set.jsonl").summary(show_values=True)
    sealed = evaluate_file(tmp_path / "sealed" / "set.jsonl").summary(show_values=True)
    assert shown["leaked"] == [{"line": 2, "type": "SECRET", "value": "combination"}]
    assert sealed["leaked"] == [] and sealed["sealed"] is True
    assert sealed["leaks"] == 1 and sealed["leaks_by_type"] == {"SECRET": 1}
    assert sealed["recall_by_type"] == shown["recall_by_type"]
    text = _text("set.jsonl", sealed)
    assert "combination" not in text and "line " not in text
    assert "SECRET          1 (sealed set: totals only)" in text
