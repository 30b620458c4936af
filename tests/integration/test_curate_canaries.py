"""The privacy check of every curate run (issue 43) through real Prefect runs, the real
Presidio engine and the real rule file under promtool: with an anonymiser weakened by a
setting (it looks for e-mail addresses only), the run's canaries leak, so it commits nothing,
fails in one line naming the types, audits the check without a value, counts the rows it did
not commit, leaves its window for the next run, and its recall gauges fire CanaryRecallLow;
a normal run commits, reports canary recall 1.0 for every language and type, and no canary
reaches the table, the quarantine or the audit log."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from infra.catalog import open_catalog, scan
from infra.errors import PrivacyCheckFailed
from infra.settings import get_settings
from infra.store import open_store
from tasks.curate.canaries import plant
from tasks.feedback import stale_windows
from tests.data.pii_corpus import generate, plant_window
from tests.unit.test_monitoring_alerts import check_alert, series

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
W0 = "2026-11-22T10:00:00Z"
SEED = 20261122
RECALL = "flywheel_pii_canary_recall"


def _setup(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")  # every real row reaches the table
    monkeypatch.setenv("FLYWHEEL_CURATE__CANARY_SEED", str(SEED))  # to know the values
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    plant_window(open_store(get_settings()), T0, generate(12, seed=4), users=4)


def _canary_values() -> list[str]:
    cfg = get_settings().curate
    canaries = plant(cfg.languages, per_language=cfg.canary_records, seed=SEED, window=W0, at=T0)
    return [v.value for c in canaries for v in c.values]


def _tables() -> dict[str, list[dict]]:
    catalog = open_catalog(get_settings())
    return {
        name: scan(catalog, name).to_pylist()
        for name in ("training_examples", "quarantine", "audit_log")
    }


def _gauges() -> dict[tuple[str, str], float]:
    state = json.loads(open_store(get_settings()).get("metrics/curate.json"))
    out = {}
    for key, value in state["gauges"][RECALL].items():
        labels = dict(json.loads(key))
        out[(labels["language"], labels["entity_type"])] = value
    return out


def _alerts_for(gauges: dict[tuple[str, str], float], tmp_path: Path) -> None:
    """CanaryRecallLow fires for exactly the pairs the run pushed below 1.0."""
    inputs = [
        series(
            RECALL, f"{value}x30", job="flywheel", stage="curate", language=lang, entity_type=etype
        )
        for (lang, etype), value in gauges.items()
    ]
    expected = [
        {"severity": "critical", "language": lang, "entity_type": etype}
        for (lang, etype), value in sorted(gauges.items())
        if value < 1.0
    ]
    check_alert((inputs, "CanaryRecallLow", "10m", expected), tmp_path)


def test_a_weakened_anonymiser_commits_nothing_and_fires_the_alert(
    prefect_api: None, flywheel_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from flows.curate import curate

    _setup(monkeypatch, FLYWHEEL_CURATE__ENTITIES='["EMAIL_ADDRESS"]')
    with pytest.raises(PrivacyCheckFailed) as failed:
        curate(window_start=T0)
    line = str(failed.value)
    assert "\n" not in line and line.endswith("nothing committed")
    assert "en PERSON 0.00" in line and "ko PERSON 0.00" in line
    assert "EMAIL_ADDRESS" not in line  # e-mails were still removed

    tables = _tables()
    assert tables["training_examples"] == [] and tables["quarantine"] == []
    [check] = [json.loads(r["details"]) for r in tables["audit_log"]]
    assert check["passed"] is False and check["seed"] == SEED
    everything = json.dumps(tables, default=str) + line
    assert not [v for v in _canary_values() if v in everything]

    gauges = _gauges()
    assert gauges[("en", "EMAIL_ADDRESS")] == gauges[("ko", "EMAIL_ADDRESS")] == 1.0
    assert gauges[("en", "PERSON")] == gauges[("ko", "PERSON")] == 0.0
    _alerts_for(gauges, tmp_path)
    state = json.loads(open_store(get_settings()).get("metrics/curate.json"))["counters"]
    records = {
        dict(json.loads(k))["outcome"]: v for k, v in state["flywheel_stage_records_total"].items()
    }
    assert records["not_committed_canary_leak"] > 0
    runs = {dict(json.loads(k))["status"]: v for k, v in state["flywheel_stage_runs_total"].items()}
    assert runs == {"failure": 1}
    assert stale_windows(open_store(get_settings()), stage="curate") == [W0]  # curated again


def test_a_normal_run_commits_with_canary_recall_one(
    prefect_api: None, flywheel_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from flows.curate import curate

    _setup(monkeypatch)
    result = curate(window_start=T0)
    assert result.written > 0
    assert result.canary_recall and set(result.canary_recall.values()) == {1.0}
    assert {k.split("/")[0] for k in result.canary_recall} == {"en", "ko"}
    tables = _tables()
    assert len(tables["training_examples"]) == result.written
    assert not [r for r in tables["training_examples"] if r["trace_id"].startswith("canary-")]
    checks = [
        json.loads(r["details"])
        for r in tables["audit_log"]
        if r["event_type"] == "curate.canary_check"
    ]
    assert [c["passed"] for c in checks] == [True]
    everything = json.dumps(tables, default=str)
    assert "canary-" not in everything  # no canary trace in any table or per-trace audit
    assert not [v for v in _canary_values() if v in everything]
    gauges = _gauges()
    assert len(gauges) == 13 and set(gauges.values()) == {1.0}
    _alerts_for(gauges, tmp_path)  # nothing fires
    assert stale_windows(open_store(get_settings()), stage="curate") == []
