"""The weekly run's privacy check (issue 43): it does not train on a day whose curate runs let
canary values through anonymisation, says why in one line and audits the refusal; a person's
reason overrides it (audited with the recall it overrode); a clean day, or a leak older than a
day, trains as before. Training and the release are the stand-ins of
test_weekly_workloads.py; the audit log, the routing and Prefect are real."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from infra.audit import audit_row
from infra.catalog import append_rows, open_catalog, scan
from infra.errors import PrivacyCheckFailed
from infra.routing import load_state
from infra.runtime import Runtime
from infra.settings import get_settings
from tests.integration.test_weekly_workloads import _plant, fake_release, fake_train

pytestmark = pytest.mark.integration


@pytest.fixture
def weekly(prefect_api: None, flywheel_home: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The weekly flow with the stand-in train and release, a minimum of 4 examples."""
    import flows.weekly as weekly_flow

    monkeypatch.setenv("FLYWHEEL_TRAIN__MIN_PAIRS", "4")
    get_settings.cache_clear()
    monkeypatch.setattr(weekly_flow, "train", fake_train)
    monkeypatch.setattr(weekly_flow, "release", fake_release)
    return weekly_flow.weekly


def _checks(*runs: tuple[float, int], hours_ago: float = 1) -> None:
    """One audited curate canary check per ``(recall of en/PERSON, planted)``."""
    rows = []
    for recall, planted in runs:
        removed = round(recall * planted)
        details = {
            "seed": 1,
            "records": 32,
            "min_recall": 1.0,
            "passed": removed == planted,
            "unprocessed": 0,
            "recall": [
                {
                    "language": "en",
                    "entity_type": "PERSON",
                    "planted": planted,
                    "removed": removed,
                    "recall": removed / planted,
                },
                {
                    "language": "ko",
                    "entity_type": "KR_RRN",
                    "planted": 8,
                    "removed": 8,
                    "recall": 1.0,
                },
            ],
        }
        at = datetime.now(UTC) - timedelta(hours=hours_ago)
        rows.append(
            audit_row(
                event_type="curate.canary_check",
                actor="curate",
                subject="w",
                details=details,
                at=at,
            )
        )
    append_rows(open_catalog(get_settings()), "audit_log", rows)


def _audit(event_type: str) -> list[dict[str, Any]]:
    rows = scan(open_catalog(get_settings()), "audit_log").to_pylist()
    return [json.loads(r["details"]) for r in rows if r["event_type"] == event_type]


def test_a_day_whose_canaries_leaked_is_not_trained_on(weekly: Any) -> None:
    _plant(none=5)
    _checks((1.0, 16), (0.75, 16), (1.0, 16))
    with pytest.raises(PrivacyCheckFailed) as refused:
        weekly()
    line = str(refused.value)
    assert "\n" not in line and "en PERSON 0.92" in line and "1 of 3 curate runs" in line
    assert "privacy_override" in line
    assert load_state(Runtime.from_env().store).stable == "v0"  # nothing trained or released
    [event] = _audit("train.privacy_refused")
    assert event["recall"]["en/PERSON"] == pytest.approx(44 / 48, abs=1e-4)
    assert event["runs"] == 3 and event["failed_runs"] == 1


def test_a_reason_overrides_the_refusal_and_is_audited(weekly: Any) -> None:
    _plant(none=5)
    _checks((0.5, 16))
    out = weekly(privacy_override="INC-4411: leak was a test tenant, fixed in 2.3.1")
    assert out["train"].status == "trained" and out["release"].outcome == "promoted"
    assert load_state(Runtime.from_env().store).stable == "v6"
    [event] = _audit("train.privacy_override")
    assert event["reason"] == "INC-4411: leak was a test tenant, fixed in 2.3.1"
    assert event["recall"]["en/PERSON"] == 0.5 and not _audit("train.privacy_refused")


def test_a_clean_day_and_an_old_leak_train_as_before(weekly: Any) -> None:
    _plant(none=5)
    _checks((0.5, 16), hours_ago=30)  # the day before yesterday's leak
    _checks((1.0, 16), (1.0, 16))
    out = weekly()
    assert out["train"].status == "trained"
    assert not _audit("train.privacy_refused") and not _audit("train.privacy_override")
