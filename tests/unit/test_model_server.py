"""The release's model-server bookkeeping: which adapters are unloaded when, and how a replica
that cannot be reached or refuses an adapter is reported."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from infra.errors import ModelServerError
from infra.routing import RoutingState
from infra.routing.state import Transition
from infra.serving.model_server import VLLMServer
from tasks.release.machine.adapters import unload_unrouted
from tests.procs import free_port

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


class Served:
    """What a model server serves (the protocol's bookkeeping, no HTTP)."""

    base_version = "v0"

    def __init__(self, *versions: str) -> None:
        self.versions = ["v0", *versions]
        self.unloaded: list[str] = []

    def served(self) -> list[str]:
        return list(self.versions)

    def unload(self, version: str) -> None:
        self.versions.remove(version)
        self.unloaded.append(version)


def promoted(version: str, at: datetime) -> Transition:
    return Transition(
        at=at, from_phase="canary", to_phase="promoted", candidate=version, actor="t", reason="r"
    )


def test_a_rolled_back_candidate_is_unloaded_and_the_stable_kept() -> None:
    server = Served("v1", "v2")
    state = RoutingState(stable="v1", candidate="v2", phase="rolled_back", rejected=["v2"])
    assert unload_unrouted(server, state, bake_s=600, now=NOW) == ["v2"]
    assert server.served() == ["v0", "v1"]


def test_the_old_stable_bakes_after_a_promotion_then_goes() -> None:
    server = Served("v1", "v2")
    state = RoutingState(
        stable="v2", candidate="v2", phase="promoted", history=[promoted("v2", NOW)]
    )
    assert unload_unrouted(server, state, bake_s=600, now=NOW + timedelta(seconds=60)) == []
    assert "v1" in server.served()  # a rollback after the promotion is instant
    assert unload_unrouted(server, state, bake_s=600, now=NOW + timedelta(seconds=601)) == ["v1"]
    assert server.served() == ["v0", "v2"]


def test_the_base_model_and_a_routed_candidate_are_never_unloaded() -> None:
    server = Served("v3")
    state = RoutingState(stable="v0", candidate="v3", phase="canary", weight=25)
    assert unload_unrouted(server, state, bake_s=0, now=NOW) == []
    assert server.served() == ["v0", "v3"]


def test_an_unreachable_replica_is_named_in_the_error() -> None:
    port = free_port()  # nothing listens there
    server = VLLMServer(["http://127.0.0.1:1", f"http://127.0.0.1:{port}/v1"], timeout_s=2)
    assert server.urls[1] == f"http://127.0.0.1:{port}"
    with pytest.raises(ModelServerError, match="cannot list its models"):
        server.load("v1", "/nowhere")
    assert server.health() is not None and "unreachable" in (server.health() or "")


def test_no_replica_is_a_configuration_error() -> None:
    with pytest.raises(ModelServerError, match="FLYWHEEL_MODEL_SERVER__URLS"):
        VLLMServer([])


def test_the_gateway_sends_every_version_without_an_upstream_to_the_model_server(
    tmp_path: Path,
) -> None:
    from infra.settings import GatewaySettings, ModelServerSettings, Settings
    from infra.store import LocalStore
    from infra.upstream.upstreams import HttpUpstream, ReplicaUpstream, UpstreamPool

    one = Settings(
        home=tmp_path,
        gateway=GatewaySettings(upstreams={"v2": "http://127.0.0.1:9/v1"}),
        model_server=ModelServerSettings(kind="vllm", urls=["http://127.0.0.1:8000"]),
    )
    pool = UpstreamPool(one, LocalStore(tmp_path / "store"))
    v7 = pool.get("v7")
    assert isinstance(v7, HttpUpstream) and v7.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert v7.version == "v7"  # the adapter's name on the server is the version
    assert pool.get("v2").url.startswith("http://127.0.0.1:9/")  # type: ignore[attr-defined]
    two = one.model_copy(
        update={
            "model_server": ModelServerSettings(
                kind="vllm", urls=["http://127.0.0.1:8000", "http://127.0.0.1:8001/v1"]
            )
        }
    )
    replicas = UpstreamPool(two, LocalStore(tmp_path / "store")).get("v7")
    assert isinstance(replicas, ReplicaUpstream)
    assert [r.base_url for r in replicas.replicas] == [
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8001/v1",
    ]
    off = Settings(home=tmp_path)
    assert not isinstance(UpstreamPool(off, LocalStore(tmp_path / "s")).get("v7"), HttpUpstream)


def test_in_process_versions_share_one_batcher(tmp_path: Path) -> None:
    """Stable and a candidate served in process queue in one place (infra.upstream.batcher):
    neither version's share of the traffic decides how long its users wait."""
    from infra.settings import Settings
    from infra.store import LocalStore
    from infra.upstream.local import LocalUpstream
    from infra.upstream.upstreams import UpstreamPool

    pool = UpstreamPool(Settings(home=tmp_path), LocalStore(tmp_path / "store"))
    v0, v1 = pool.get("v0"), pool.get("v1")
    assert isinstance(v0, LocalUpstream) and isinstance(v1, LocalUpstream)
    assert v0.engine is not None and v0.engine is v1.engine


def test_a_missing_or_empty_vllm_environment_names_make_vllm(tmp_path: Path) -> None:
    from infra.errors import ConfigError
    from infra.serving.vllm_process import vllm_python

    with pytest.raises(ConfigError, match="make vllm"):
        vllm_python(tmp_path / "absent")
    (tmp_path / "venv/bin").mkdir(parents=True)
    (tmp_path / "venv/bin/python").write_text("")
    with pytest.raises(ConfigError, match="no vllm package: run `make vllm`"):
        vllm_python(tmp_path / "venv")
    (tmp_path / "venv/lib/python3.11/site-packages/vllm").mkdir(parents=True)
    (tmp_path / "venv/lib/python3.11/site-packages/vllm/__init__.py").write_text("")
    assert vllm_python(tmp_path / "venv") == tmp_path / "venv/bin/python"
