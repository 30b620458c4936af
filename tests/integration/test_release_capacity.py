"""A release the model server has no room for is refused before the routing state changes: one
line naming the limit and the adapters loaded; no workload's routing moves, nothing is
loaded. An adapter the routing no longer routes to is unloaded first and frees its place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.errors import ControlRefused
from infra.routing import RoutingState, WorkloadRelease, load_state, save_state
from infra.serving.models import publish_model_dir
from infra.settings import get_settings
from infra.store import open_store
from tests.fakes.lora_server import start_lora_server

pytestmark = pytest.mark.integration


def test_a_release_beyond_max_loras_is_refused_before_routing_changes(
    prefect_api: None, flywheel_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from flows.release import ReleaseOptions, release

    with start_lora_server(adapters={"v1": "/m/v1", "v2": "/m/v2", "v4": "/m/v4"}) as fake:
        monkeypatch.setenv("FLYWHEEL_MODEL_SERVER__KIND", "vllm")
        monkeypatch.setenv("FLYWHEEL_MODEL_SERVER__URLS", json.dumps([fake.url]))
        monkeypatch.setenv("FLYWHEEL_MODEL_SERVER__MAX_LORAS", "2")
        monkeypatch.setenv("FLYWHEEL_WORKLOADS", '["a", "b"]')
        get_settings.cache_clear()
        store = open_store(get_settings())
        (tmp_path / "v3").mkdir()
        (tmp_path / "v3/adapter_config.json").write_text("{}")
        publish_model_dir(store, "v3", tmp_path / "v3")
        # v1 serves everyone, b's canary routes to v2; v4 was rejected (loaded, routed nowhere)
        b = WorkloadRelease(candidate="v2", phase="canary", weight=50, release_id="r-b")
        state = RoutingState(stable="v1", rejected=["v4"], workloads={"b": b})
        save_state(store, state)
        before = load_state(store)
        with pytest.raises(ControlRefused) as refused:
            release("v3", ReleaseOptions(workload="a"))
        why = str(refused.value)
        assert "\n" not in why and "at most 2 adapters" in why and "v1, v2" in why
        after = load_state(store)
        assert after.revision == before.revision and "a" not in after.workloads
        assert after.workloads["b"].candidate == "v2" and after.workloads["b"].weight == 50
        assert sorted(fake.adapters) == ["v1", "v2"] and fake.loads == 0  # v4 made no room
    get_settings.cache_clear()
