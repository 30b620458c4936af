"""What an operator sees first: `flywheel gateway` and `flywheel status` on an empty home say
the stable version cannot be served and what to run; a placeholder or short user salt is
refused like the admin token; feedback on a version an operator named is not counted in the
series the release reads."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from pydantic import SecretStr

from infra.errors import ConfigError
from infra.gateway import start_background_gateway
from infra.gateway.parts import Intervals
from infra.routing import RoutingState, save_state
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from tests.fakes.upstream import FakeUpstreamHandle, start_fake_upstream
from tests.integration.test_gateway_edge import cli_env, metric
from tests.procs import free_port

pytestmark = pytest.mark.integration

TOKEN = "startup-admin-token-0123456789abcdef0123456789"
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstreamHandle]]:
    handles = {v: start_fake_upstream(v) for v in ("v0", "v1")}
    yield handles
    for handle in handles.values():
        handle.stop()


def test_flywheel_gateway_and_status_on_an_empty_home_say_what_to_run(tmp_path: Path) -> None:
    port = free_port()
    env = cli_env(tmp_path, FLYWHEEL_GATEWAY__PORT=str(port))
    proc = subprocess.Popen(
        [sys.executable, "-m", "deployments.cli", "gateway"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        assert "gateway listening on" in proc.stdout.readline()
        warning = proc.stdout.readline()
        assert "stable version v0 cannot be served" in warning, warning
        assert "open mode: no client API keys" in proc.stdout.readline()  # anyone may call
        assert "flywheel bootstrap" in warning and "FLYWHEEL_GATEWAY__UPSTREAMS" in warning
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()
        assert models["data"] == []  # nothing a client could call yet
    finally:
        proc.terminate()
        proc.wait(30)
    status = subprocess.run(
        [sys.executable, "-m", "deployments.cli", "status", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    fields = json.loads(status.stdout.strip().splitlines()[-1])
    assert fields["stable"] == "v0" and "flywheel bootstrap" in fields["warning"]


@pytest.mark.parametrize("salt", ["change-me", "changeme-salt-value-xyz", "short-salt"])
def test_a_placeholder_or_short_user_salt_is_refused(tmp_path: Path, salt: str) -> None:
    settings = Settings(home=tmp_path, user_salt=SecretStr(salt))
    with pytest.raises(ConfigError, match="FLYWHEEL_USER_SALT"):
        start_background_gateway(settings, port=0, store=LocalStore(tmp_path / "store"))


def test_the_compose_placeholder_salt_stops_flywheel_gateway_in_one_line(tmp_path: Path) -> None:
    env = cli_env(tmp_path, FLYWHEEL_USER_SALT="change-me")
    out = subprocess.run(
        [sys.executable, "-m", "deployments.cli", "gateway"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    lines = (out.stdout + out.stderr).strip().splitlines()
    assert out.returncode != 0 and len(lines) == 1 and "FLYWHEEL_USER_SALT" in lines[0], lines


def test_feedback_on_a_version_an_operator_named_is_not_counted(
    tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle]
) -> None:
    """A thumbs-down on a by-name candidate trace would land in the series its feedback alert
    and rail read; it is taken (training may use it) but not counted there."""
    store = LocalStore(tmp_path / "store")
    save_state(store, RoutingState(candidate="v1", phase="shadow", shadow_fraction=0.0))
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(
            upstreams={v: h.url for v, h in upstreams.items()},
            admin_token=SecretStr(TOKEN),
            diverse_fraction=0.0,
        ),
    )
    with start_background_gateway(
        settings, port=0, store=store, intervals=Intervals(state_s=0.1)
    ) as gw:
        public = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="any", max_retries=0)
        with pytest.raises(openai.NotFoundError):  # gating or shadow: not callable by name
            public.chat.completions.create(model="v1", messages=MESSAGES)
        operator = openai.OpenAI(base_url=f"{gw.admin_url}/v1", api_key=TOKEN, max_retries=0)
        named = operator.chat.completions.with_raw_response.create(model="v1", messages=MESSAGES)
        routed = public.chat.completions.with_raw_response.create(
            model="flywheel", messages=MESSAGES
        )
        for raw in (named, routed):
            vote = {"trace_id": raw.headers["x-trace-id"], "value": -1}
            assert httpx.post(f"{gw.url}/v1/feedback", json=vote).status_code == 202
        assert metric(gw, "user_feedback_total", model="v1", value="-1", workload="default") == 0
        assert metric(gw, "user_feedback_total", model="v0", value="-1", workload="default") == 1
        health = httpx.get(f"{gw.url}/healthz").json()
        assert health == {"status": "ok", "stable": "v0"}  # no candidate is ever public
    assert upstreams["v1"].app.calls == 1
