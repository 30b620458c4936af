"""How many adapters one model server holds: the limit sized from the configuration
(``FLYWHEEL_MODEL_SERVER__MAX_LORAS``, else two per release line plus one baking), and a load
beyond it refused in one line naming the limit and what is loaded, before anything is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.errors import ModelServerError
from infra.serving.model_server import VLLMServer, capacity_refusal
from infra.settings import ModelServerSettings, RewardSettings, Settings, TrainSettings
from infra.store import LocalStore
from tests.fakes.lora_server import start_lora_server


def test_the_default_holds_every_configured_workloads_stable_and_candidate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLYWHEEL_MODEL_SERVER__MAX_LORAS", raising=False)
    # shared stable + candidate + one baking; the demo's two workloads by default
    assert Settings(home=tmp_path, workloads=[]).model_server.max_loras == 3
    assert Settings(home=tmp_path).model_server.max_loras == 2 * (2 + 1) + 1
    two = Settings(
        home=tmp_path,
        workloads=["units", "calculator"],
        reward=RewardSettings(golden_sets={"units": tmp_path, "default": tmp_path}),
        train=TrainSettings(workload_buffer_days={"calculator": 3, "units": 1}),
    )
    assert two.configured_workloads() == ["calculator", "units"]
    assert two.model_server.max_loras == 2 * (2 + 1) + 1
    monkeypatch.setenv("FLYWHEEL_MODEL_SERVER__MAX_LORAS", "12")
    assert Settings(home=tmp_path).model_server.max_loras == 12  # the operator's number wins


def test_a_load_beyond_the_limit_is_refused_naming_the_limit_and_the_adapters() -> None:
    with start_lora_server(adapters={"v1": "/a/v1", "v2": "/a/v2"}) as fake:
        server = VLLMServer([fake.url], max_loras=2)
        why = capacity_refusal(server, "v3", 2)
        assert why is not None and "\n" not in why
        assert "2 of at most 2 adapters" in why and "v1, v2" in why and "MAX_LORAS" in why
        with pytest.raises(ModelServerError, match="model server full"):
            server.load("v3", "/a/v3")
        assert fake.loads == 0 and sorted(fake.adapters) == ["v1", "v2"]  # nothing loaded
        server.load("v2", "/a/v2")  # one it serves already needs no room
        assert capacity_refusal(server, "v3", 3) is None
        server.unload("v1")
        server.load("v3", "/a/v3")  # room again
        assert server.served() == ["v0", "v2", "v3"] and fake.loads == 1


def test_the_settings_limit_reaches_the_server(tmp_path: Path) -> None:
    from infra.serving.base_servers import open_model_server

    with start_lora_server() as fake:
        settings = Settings(
            home=tmp_path,
            model_server=ModelServerSettings(kind="vllm", urls=[fake.url], max_loras=4),
        )
        server = open_model_server(settings, LocalStore(tmp_path / "store"))
        assert server is not None and server.primary.max_loras == 4
