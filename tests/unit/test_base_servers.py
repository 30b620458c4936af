"""A distilled student is a base model of its own, so it is served by a model server of its own:
the release starts one when it loads the student (through the process's launcher) or uses the
one the operator names, records where the student is served, and the gateway and the gate's
answer sources route the student there while every adapter of the configured base stays on the
configured server; the launched server is stopped and forgotten once the student is unloaded."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from infra.errors import ModelServerError
from infra.serving.base_servers import (
    SERVERS_KEY,
    BaseServers,
    ServedAt,
    ServerTrust,
    launching,
    open_model_server,
    read_served,
    record_served,
    version_urls,
)
from infra.serving.model_server import VLLMServer
from infra.settings import ModelServerSettings, Settings
from infra.store import LocalStore
from tests.fakes.lora_server import LoraServer, start_lora_server

TRUST = ServerTrust(key=b"k" * 32, configured=frozenset())


class FakeLaunchers:
    """Starts a LoRA-bookkeeping server per base (what vLLM would serve) and counts starts."""

    def __init__(self) -> None:
        self.stack = ExitStack()
        self.servers: dict[str, tuple[ExitStack, LoraServer]] = {}
        self.started: list[tuple[str, str]] = []

    def start(self, base: str, model_dir: str) -> list[str]:
        if base not in self.servers:
            stack = ExitStack()
            self.servers[base] = (stack, stack.enter_context(start_lora_server(base=base)))
            self.started.append((base, model_dir))
        return [self.servers[base][1].url]

    def stop(self, base: str) -> None:
        stack, _ = self.servers.pop(base)
        stack.close()

    def running(self) -> dict[str, list[str]]:
        return {base: [server.url] for base, (_, server) in self.servers.items()}

    def close(self) -> None:
        for base in list(self.servers):
            self.stop(base)


def _adapter(store: LocalStore, version: str, base: str) -> None:
    store.put(f"models/{version}/adapter_config.json", b"{}")
    store.put(f"models/{version}/base_model.json", json.dumps({"version": base}).encode())


def _full(store: LocalStore, version: str) -> None:
    store.put(f"models/{version}/config.json", b"{}")


@contextmanager
def two_bases(tmp_path: Path) -> Iterator[tuple[LocalStore, LoraServer, FakeLaunchers, Settings]]:
    """A store with v0 (the configured base), v1 (its adapter), v2 (a student) and v3 (an
    adapter of the student), the configured server, and a launcher in force."""
    store = LocalStore(tmp_path / "store")
    _full(store, "v0")
    _adapter(store, "v1", "v0")
    _full(store, "v2")
    _adapter(store, "v3", "v2")
    launchers = FakeLaunchers()
    with start_lora_server() as primary, launching(launchers):
        settings = Settings(
            home=tmp_path, model_server=ModelServerSettings(kind="vllm", urls=[primary.url])
        )
        try:
            yield store, primary, launchers, settings
        finally:
            launchers.close()


def test_a_student_gets_a_server_of_its_own_and_adapters_go_to_their_base(tmp_path: Path) -> None:
    with two_bases(tmp_path) as (store, primary, launchers, settings):
        server = open_model_server(settings, store)
        assert isinstance(server, BaseServers)
        server.load("v1", "/m/v1")
        assert sorted(primary.adapters) == ["v1"] and not launchers.started
        server.load("v2", "/m/v2")  # the student: its server is started on its directory
        assert launchers.started == [("v2", "/m/v2")]
        student = launchers.servers["v2"][1]
        server.load("v3", "/m/v3")  # the student's adapter: on the student's server
        assert sorted(student.adapters) == ["v3"] and sorted(primary.adapters) == ["v1"]
        assert server.served() == ["v0", "v1", "v2", "v3"]
        served = read_served(store, ServerTrust.from_settings(settings))
        assert served == {
            "v2": ServedAt("v2", (student.url,)),
            "v3": ServedAt("v2", (student.url,)),
        }
        assert version_urls("v2", settings, store) == [student.url]
        assert version_urls("v1", settings, store) == [primary.url]
        server.load("v2", "/m/v2")  # loaded again (a continued release): no second server
        assert len(launchers.started) == 1
        server.unload("v2")  # its adapter still runs on it: kept
        assert "v2" in launchers.running()
        server.unload("v3")
        server.unload("v2")
        assert launchers.running() == {} and read_served(store, TRUST) == {}
        server.unload("v0")  # the configured base is never unloaded
        assert server.served() == ["v0", "v1"]


def test_without_a_launcher_or_a_named_server_the_student_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path / "store")
    _full(store, "v2")
    with start_lora_server() as primary:
        server = BaseServers(VLLMServer([primary.url]), store=store, trust=TRUST)
        with pytest.raises(ModelServerError) as err:
            server.load("v2", "/m/v2")
        assert "\n" not in str(err.value) and "FLYWHEEL_MODEL_SERVER__BASES" in str(err.value)
        assert not store.exists(SERVERS_KEY) and primary.loads == 0
        with start_lora_server(base="v2") as named:  # the operator runs the student's server
            server = BaseServers(
                VLLMServer([primary.url]), store=store, trust=TRUST, bases={"v2": [named.url]}
            )
            server.load("v2", "/m/v2")
            assert read_served(store, TRUST)["v2"] == ServedAt("v2", (named.url,))
            assert server.served() == ["v0", "v2"] and primary.loads == 0


def test_a_student_takes_no_adapter_slot_and_its_adapters_count_on_its_own_server(
    tmp_path: Path,
) -> None:
    with two_bases(tmp_path) as (store, primary, _, settings):
        server = open_model_server(settings, store)
        assert server is not None
        server.load("v1", "/m/v1")
        _adapter(store, "v4", "v0")
        _adapter(store, "v5", "v2")
        assert server.refusal("v2", 1) is None  # a base of its own
        why = server.refusal("v4", 1)  # v0's server holds v1 already
        assert why is not None and "1 of at most 1 adapters" in why and "v1" in why
        server.load("v2", "/m/v2")
        assert server.refusal("v5", 1) is None  # the student's server is empty
        server.load("v5", "/m/v5")
        assert server.refusal("v3", 1) is not None  # and now it is full
        store.put("models/v6/adapter_config.json", b"{}")  # an adapter naming no base
        why = server.refusal("v6", 1)  # counted on v0's server, which holds v1
        assert why is not None and "1 of at most 1 adapters" in why and "v1;" in why


def test_the_gateway_routes_a_recorded_version_to_its_base_and_the_rest_to_the_configured(
    tmp_path: Path,
) -> None:
    from infra.upstream.upstreams import HttpUpstream, UpstreamPool

    store = LocalStore(tmp_path / "store")
    settings = Settings(
        home=tmp_path,
        model_server=ModelServerSettings(kind="vllm", urls=["http://127.0.0.1:8000"]),
    )
    pool = UpstreamPool(settings, store)
    trust = ServerTrust.from_settings(settings)
    record_served(store, {"v2": ServedAt("v2", ("http://127.0.0.1:8002",))}, trust)
    first = pool.get("v2")  # not read yet: the configured server
    assert isinstance(first, HttpUpstream) and first.base_url == "http://127.0.0.1:8000/v1"
    pool.refresh_served()
    student = pool.get("v2")
    assert isinstance(student, HttpUpstream)
    assert (student.base_url, student.version) == ("http://127.0.0.1:8002/v1", "v2")
    assert pool.get("v2") is student  # built once
    assert pool.get("v1").base_url == "http://127.0.0.1:8000/v1"  # type: ignore[attr-defined]
    record_served(store, {"v2": None}, trust)
    pool.refresh_served()
    assert pool.get("v2").base_url == "http://127.0.0.1:8000/v1"  # type: ignore[attr-defined]


def test_two_releases_recording_at_once_both_land(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    start = threading.Barrier(8)

    def one(i: int) -> None:
        start.wait()
        at = ServedAt(f"v{i}", (f"http://127.0.0.1:{9000 + i}",))
        record_served(store, {f"v{i}": at}, TRUST)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(read_served(store, TRUST)) == sorted(f"v{i}" for i in range(8))


def test_a_server_the_store_names_is_used_only_when_configured_or_signed(tmp_path: Path) -> None:
    """Whoever can write the bucket cannot send a version's conversations to a host of theirs:
    an entry of deploy/servers.json that names an unconfigured URL without this deployment's
    signature is ignored by the gateway and by the release, and dropped at the next write."""
    from infra.upstream.upstreams import HttpUpstream, UpstreamPool

    store = LocalStore(tmp_path / "store")
    settings = Settings(
        home=tmp_path,
        model_server=ModelServerSettings(
            kind="vllm",
            urls=["http://127.0.0.1:8000"],
            bases={"v7": ["http://vllm-student:8000"]},
        ),
    )
    planted = {
        "v2": {"base": "v2", "urls": ["http://attacker.example:80"]},  # unsigned
        "v3": {"base": "v3", "urls": ["http://attacker.example:80"], "sig": "0" * 64},
        "v7": {"base": "v7", "urls": ["http://vllm-student:8000/"]},  # configured: no sig needed
    }
    store.put(SERVERS_KEY, json.dumps({"versions": planted}).encode())
    trust = ServerTrust.from_settings(settings)
    assert read_served(store, trust) == {"v7": ServedAt("v7", ("http://vllm-student:8000/",))}
    pool = UpstreamPool(settings, store)
    pool.refresh_served()
    for version in ("v2", "v3"):
        upstream = pool.get(version)
        assert isinstance(upstream, HttpUpstream)
        assert upstream.base_url == "http://127.0.0.1:8000/v1"  # the configured server
    assert version_urls("v2", settings, store) == ["http://127.0.0.1:8000"]
    # a release's own record (signed with a key only the deployment's salt gives) is used
    launched = ServedAt("v4", ("http://127.0.0.1:8004",))
    record_served(store, {"v4": launched}, trust)
    assert read_served(store, trust)["v4"] == launched
    assert set(json.loads(store.get(SERVERS_KEY))["versions"]) == {"v4", "v7"}  # planted: gone
    other = ServerTrust.from_settings(Settings(home=tmp_path / "elsewhere", user_salt="x" * 32))
    assert "v4" not in read_served(store, other)  # another secret's signature is no signature


def test_the_model_server_is_called_with_its_key_and_a_launch_sees_no_secrets(
    tmp_path: Path,
) -> None:
    """Every model server runs with --api-key (its /v1 routes, adapter loading included, refuse
    a caller without it): the release's loads and the gateway's calls carry the key, which
    every flywheel process derives from the salt when none is configured; and a launched
    server inherits none of this process's secrets."""
    from infra.serving.vllm_process import launch_environment
    from infra.upstream.upstreams import HttpUpstream, model_server_upstream

    settings = Settings(home=tmp_path, model_server=ModelServerSettings(kind="vllm", urls=["x"]))
    key = settings.model_server_key()
    assert key == Settings(home=tmp_path).model_server_key() and settings.salt() not in key
    with start_lora_server(api_key=key) as guarded:
        settings = Settings(
            home=tmp_path, model_server=ModelServerSettings(kind="vllm", urls=[guarded.url])
        )
        store = LocalStore(tmp_path / "store")
        _adapter(store, "v1", "v0")
        server = open_model_server(settings, store)
        assert server is not None and server.health() is None
        server.load("v1", "/m/v1")
        assert guarded.adapters == {"v1": "/m/v1"} and guarded.refused == 0
        with pytest.raises(ModelServerError):  # no key: refused
            VLLMServer([guarded.url]).served()
        assert guarded.refused == 1
    upstream = model_server_upstream("v1", settings, session=None)  # type: ignore[arg-type]
    assert isinstance(upstream, HttpUpstream) and key.encode() in upstream._headers
    env = launch_environment(
        {
            "PATH": "/usr/bin",
            "HOME": "/root",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "2",
            "FLYWHEEL_USER_SALT": "s" * 32,
            "FLYWHEEL_S3_SECRET_ACCESS_KEY": "minio-secret",
            "AWS_SECRET_ACCESS_KEY": "aws-secret",
            "FLYWHEEL_GATEWAY__ADMIN_TOKEN": "t" * 32,
            "LANGFUSE_SECRET_KEY": "sk-lf",
            "PYTHONPATH": "/work",
        }
    )
    assert set(env) == {
        "PATH",
        "HOME",
        "VLLM_CPU_KVCACHE_SPACE",
        "HF_HUB_OFFLINE",
        "OMP_NUM_THREADS",
    }
