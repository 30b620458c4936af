"""The environment docker-compose.yml gives flywheel: every FLYWHEEL_* variable is a real
setting and parses into the production settings, listeners and upstreams match the services,
secrets are required, PREFECT_* variables are Prefect settings."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import get_origin

import pytest
import yaml
from pydantic import AliasChoices, BaseModel

from infra.settings import Settings
from tests.unit.test_compose import (
    _URL,
    FAKE_ENV,
    REQUIRED,
    ROOT,
    SERVICES,
    env_of,
    exposed,
    interpolate,
)

ENV_EXAMPLE = (ROOT / ".env.example").read_text()
COMPOSE_ENV_EXAMPLE = (ROOT / "infra/docker/compose.env.example").read_text()
_SECRET_KEY = re.compile(r"PASSWORD|SECRET|TOKEN|SALT|ENCRYPTION_KEY|_AUTH$")


def settings_env_names(model: type[BaseModel] = Settings, prefix: str = "FLYWHEEL_") -> set[str]:
    """Env names pydantic-settings reads for ``model`` (nested models with ``__``; a dict field
    also accepts ``NAME__KEY``, listed here as ``NAME__*``)."""
    names: set[str] = set()
    for name, field in model.model_fields.items():
        env = f"{prefix}{name.upper()}"
        names.add(env)
        if isinstance(field.validation_alias, AliasChoices):
            names |= {c.upper() for c in field.validation_alias.choices if isinstance(c, str)}
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            names |= settings_env_names(ann, f"{env}__")
        elif get_origin(ann) is dict:
            names.add(f"{env}__*")
    return names


def flywheel_services() -> list[str]:
    return [s for s, spec in SERVICES.items() if "FLYWHEEL_HOME" in (spec.get("environment") or {})]


def build_settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp: Path) -> Settings:
    for var in [v for v in os.environ if v.startswith(("FLYWHEEL_", "AWS_"))]:
        monkeypatch.delenv(var)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp)  # no .env
    return Settings()


def test_interpolation_follows_compose_rules() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert (
        interpolate("a$${SET}-${SET}-${UNSET:-d}-${EMPTY:-e}-${EMPTY-f}", env) == "a${SET}-x-d-e-"
    )
    assert interpolate("${UNSET:-{}}", env) == "{}"
    with pytest.raises(KeyError, match="EMPTY"):
        interpolate("${EMPTY:?set EMPTY}", env)


def test_every_flywheel_variable_is_a_setting_and_documented() -> None:
    known = settings_env_names()
    used = {
        k
        for s in flywheel_services()
        for k in SERVICES[s]["environment"]
        if k.startswith("FLYWHEEL_")
    }
    unknown = {
        k
        for k in used
        if k not in known and not any(k.startswith(p[:-1]) for p in known if p.endswith("*"))
    }
    assert used and not unknown, f"not fields of infra.settings.Settings: {sorted(unknown)}"
    undocumented = sorted(k for k in used if k not in ENV_EXAMPLE)
    assert not undocumented, f"add to .env.example: {undocumented}"
    assert {"gateway", "prefect-worker", "prefect-deploy", "flywheel-bootstrap"} <= set(
        flywheel_services()
    )


@pytest.mark.parametrize("service", ["gateway", "prefect-worker"])
def test_flywheel_services_get_the_production_settings(
    service: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = env_of(service)
    s = build_settings(env, monkeypatch, tmp_path)
    assert s.resolved_store_url.startswith("s3://") and s.s3_endpoint_url == "http://minio:9000"
    assert s.catalog_type == "rest" and s.catalog_uri and s.resolved_warehouse.startswith("s3://")
    assert (s.trace_source, s.trace_sink) == ("langfuse", "langfuse")
    assert s.pushgateway_url and s.release.prometheus_url and s.gateway.url
    assert s.gateway.admin_token is not None
    assert s.gateway.admin_token.get_secret_value() == FAKE_ENV["GATEWAY_ADMIN_TOKEN"]
    assert s.s3_secret_access_key is not None and s.user_salt is not None
    assert s.gateway.upstreams == {}  # in-process models unless GATEWAY_UPSTREAMS is set
    assert env["PREFECT_API_URL"].endswith("/api")


def test_gateway_listens_where_compose_and_prometheus_expect(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    s = build_settings(env_of("gateway"), monkeypatch, tmp_path)
    assert s.gateway.host == "0.0.0.0" and s.gateway.port in exposed("gateway")
    assert SERVICES["gateway"]["command"] == ["flywheel", "gateway"]


def test_admin_api_is_on_the_compose_network_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Agents reach the published public port; the admin API (and Alertmanager's webhook) is
    on its own port that compose never publishes, and flows reach it by name."""
    gw = build_settings(env_of("gateway"), monkeypatch, tmp_path).gateway
    published = {int(str(p).rsplit(":", 1)[-1]) for p in SERVICES["gateway"].get("ports", [])}
    assert published == {gw.port} and gw.admin_port in exposed("gateway") - published
    assert gw.admin_host == "0.0.0.0"  # inside its container: the compose network
    worker = build_settings(env_of("prefect-worker"), monkeypatch, tmp_path).gateway
    assert worker.resolved_admin_url == f"http://gateway:{gw.admin_port}"
    am = yaml.safe_load((ROOT / "infra/alertmanager/alertmanager.yml").read_text())
    hooks = [w["url"] for r in am["receivers"] for w in r.get("webhook_configs", [])]
    assert hooks == [f"http://gateway:{gw.admin_port}/admin/alerts"]


def test_compose_example_ships_no_admin_token_value() -> None:
    line = re.search(r"^GATEWAY_ADMIN_TOKEN=(\S*)", COMPOSE_ENV_EXAMPLE, re.M)
    assert line is not None and line.group(1) == ""  # compose's :? refuses to start on empty
    assert "openssl rand -hex 32" in COMPOSE_ENV_EXAMPLE


def test_gpu_profile_upstream_example_points_at_vllm(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    example = re.search(r"^# GATEWAY_UPSTREAMS='(.+)'$", COMPOSE_ENV_EXAMPLE, re.M)
    assert example, "compose.env.example documents GATEWAY_UPSTREAMS for --profile gpu"
    env = env_of("gateway", {"GATEWAY_UPSTREAMS": example.group(1)})
    upstreams = build_settings(env, monkeypatch, tmp_path).gateway.upstreams
    vllm = SERVICES["vllm"]
    assert vllm["profiles"] == ["gpu"]
    served = vllm["command"][vllm["command"].index("--served-model-name") + 1]
    port = int(vllm["command"][vllm["command"].index("--port") + 1])
    assert list(upstreams) == [interpolate(served, {})]
    entry = upstreams[interpolate(served, {})]
    assert not isinstance(entry, str) and entry.api_key_env == "FLYWHEEL_MODEL_SERVER__API_KEY"
    url = _URL.search(entry.url)
    assert url and url.group("host") == "vllm" and int(url.group("port") or 0) == port
    assert port in exposed("vllm")
    assert SERVICES["gateway"]["depends_on"]["vllm"]["required"] is False


def test_secrets_are_required_and_documented() -> None:
    problems = []
    for name, spec in SERVICES.items():
        for key, value in (spec.get("environment") or {}).items():
            value = str(value)
            if _SECRET_KEY.search(key) and not re.fullmatch(r"\$\{\w+:\?[^}]+\}", value):
                problems.append(f"{name}.{key}: a secret must be ${{VAR:?...}}")
            for userinfo in re.findall(r"://[^/@\s]*:([^/@\s]+)@", value):
                if not re.fullmatch(r"\$\{\w+:\?[^}]+\}", userinfo):
                    problems.append(f"{name}.{key}: password in a URL must be ${{VAR:?...}}")
    assert not problems, problems
    assert {"GATEWAY_ADMIN_TOKEN", "MINIO_ROOT_PASSWORD", "USER_SALT"} <= set(REQUIRED)
    missing = [v for v in REQUIRED if not re.search(rf"^{v}=", COMPOSE_ENV_EXAMPLE, re.M)]
    assert not missing, f"document in infra/docker/compose.env.example: {missing}"
    with pytest.raises(KeyError, match="GATEWAY_ADMIN_TOKEN"):
        interpolate(str(SERVICES["gateway"]["environment"]["FLYWHEEL_GATEWAY__ADMIN_TOKEN"]), {})


def test_prefect_variables_are_prefect_settings() -> None:
    legacy = pytest.importorskip("prefect.settings.legacy")
    from prefect.settings.models.root import Settings as PrefectSettings

    valid = legacy._get_valid_setting_names(PrefectSettings)
    used = {
        k
        for spec in SERVICES.values()
        for k in (spec.get("environment") or {})
        if k.startswith("PREFECT_")
    }
    assert used and used <= valid, sorted(used - valid)


def test_gpu_profile_vllm_loads_adapters_the_release_syncs_into_the_home_volume(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With MODEL_SERVER_KIND=vllm every version is routed to the vllm service, which starts
    with runtime LoRA loading and reads the adapters the flows sync into the shared volume."""
    vllm = SERVICES["vllm"]
    assert "--enable-lora" in vllm["command"] and "--max-lora-rank" in vllm["command"]
    assert vllm["environment"]["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    example = re.search(r"^# MODEL_SERVER_URLS='(.+)'$", COMPOSE_ENV_EXAMPLE, re.M)
    assert example, "compose.env.example documents MODEL_SERVER_URLS for --profile gpu"
    extra = {"MODEL_SERVER_KIND": "vllm", "MODEL_SERVER_URLS": example.group(1)}
    for service in ("gateway", "prefect-worker"):
        ms = build_settings(env_of(service, extra), monkeypatch, tmp_path).model_server
        assert ms.enabled and ms.kind == "vllm"
        port = int(vllm["command"][vllm["command"].index("--port") + 1])
        assert all(_URL.search(u) for u in ms.urls)
        assert [
            (m.group("host"), int(m.group("port"))) for u in ms.urls if (m := _URL.search(u))
        ] == [("vllm", port)]
        assert ms.adapter_dir is not None and ms.server_path is not None
        slots = vllm["command"][vllm["command"].index("--max-loras") + 1]
        assert ms.max_loras == int(interpolate(slots, {}))  # the limit vllm starts with
        home = env_of(service)["FLYWHEEL_HOME"]
        mounts = {v.split(":")[0]: v.split(":")[1] for v in vllm["volumes"]}
        # the worker writes under its home volume; vllm sees the same volume at server_path
        volume = next(v.split(":")[0] for v in SERVICES[service]["volumes"] if home in v)
        assert str(ms.adapter_dir).startswith(home)
        assert ms.server_path == mounts[volume] + str(ms.adapter_dir).removeprefix(home)
    default = build_settings(env_of("gateway"), monkeypatch, tmp_path).model_server
    assert not default.enabled  # CPU compose: versions served in process
