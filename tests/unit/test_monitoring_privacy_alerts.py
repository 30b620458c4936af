"""The canary alert (issue 43) under ``promtool test rules`` with the real rule file: it fires
for the language and entity type whose canary recall the last curate run pushed below the bar,
for no other, and not once the next run pushes 1.0; its bar is the setting's default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from infra.settings import CurateSettings
from tests.unit.test_monitoring_alerts import check_alert, series
from tests.unit.test_monitoring_config import RULES

RECALL = "flywheel_pii_canary_recall"


def recall(values: str, language: str, entity_type: str) -> dict[str, str]:
    """The gauge as the Pushgateway exposes the curate stage's push."""
    return series(
        RECALL, values, job="flywheel", stage="curate", language=language, entity_type=entity_type
    )


def fired(language: str, entity_type: str) -> dict[str, str]:
    return {"severity": "critical", "language": language, "entity_type": entity_type}


CASES: dict[str, tuple[list[dict[str, str]], str, str, list[dict[str, str]]]] = {
    "English names leaked": (
        [recall("1x10 0.75x20", "en", "PERSON"), recall("1x30", "ko", "PERSON")],
        "CanaryRecallLow",
        "20m",
        [fired("en", "PERSON")],
    ),
    "every canary removed": (
        [recall("1x30", "en", "PERSON"), recall("1x30", "ko", "KR_RRN")],
        "CanaryRecallLow",
        "20m",
        [],
    ),
    "the next run is clean again": (
        [recall("0.5x10 1x20", "ko", "KR_RRN")],
        "CanaryRecallLow",
        "25m",
        [],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_canary_alert(case: str, tmp_path: Path) -> None:
    check_alert(CASES[case], tmp_path)


def test_the_alert_bar_is_the_setting() -> None:
    """The rule's threshold is FLYWHEEL_CURATE__CANARY_MIN_RECALL's default (the run refuses
    to commit and the weekly run to train below the same bar)."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    [rule] = [r for g in groups for r in g["rules"] if r.get("alert") == "CanaryRecallLow"]
    bar = re.search(r"<\s*([\d.]+)\s*$", rule["expr"].strip())
    assert bar is not None, rule["expr"]
    assert float(bar.group(1)) == CurateSettings().canary_min_recall
