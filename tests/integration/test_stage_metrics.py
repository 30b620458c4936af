"""Stage metrics reach a real Pushgateway, and a dead one never fails the stage."""

from __future__ import annotations

import json

import httpx
import pytest

from infra.settings import get_settings
from infra.store import open_store
from tests.integration.test_collect_flow import _fill_spool, _run_collect
from tests.procs import free_port, pushgateway

pytestmark = pytest.mark.integration


def test_stage_succeeds_with_pushgateway_down(prefect_api, flywheel_home, monkeypatch) -> None:
    monkeypatch.setenv("FLYWHEEL_PUSHGATEWAY_URL", f"http://127.0.0.1:{free_port()}")
    get_settings.cache_clear()
    _fill_spool(get_settings())
    result = _run_collect()
    assert result.written > 0
    state = json.loads(open_store(get_settings()).get("metrics/collect.json"))
    assert list(state["counters"]["flywheel_metrics_push_failures_total"].values()) == [1.0]


def test_stage_metrics_visible_on_real_pushgateway(
    prefect_api, flywheel_home, monkeypatch, tmp_path
) -> None:
    with pushgateway(tmp_path) as url:
        monkeypatch.setenv("FLYWHEEL_PUSHGATEWAY_URL", url)
        get_settings.cache_clear()
        _fill_spool(get_settings())
        _run_collect()
        _run_collect()
        text = httpx.get(f"{url}/metrics").text
    lines = [ln for ln in text.splitlines() if ln.startswith("flywheel_")]
    runs = [ln for ln in lines if ln.startswith("flywheel_stage_runs_total")]
    assert runs and 'stage="collect"' in runs[0] and 'status="success"' in runs[0]
    assert runs[0].endswith(" 2")  # cumulative across runs, not overwritten
    assert any('outcome="out"' in ln and ln.endswith(" 80") for ln in lines)
    assert any(ln.startswith("flywheel_stage_last_success_timestamp_seconds") for ln in lines)
