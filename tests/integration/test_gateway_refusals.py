"""A client's own bad request is the client's: an upstream's 400 passes to the client with the
upstream's message and is no version's error, during a canary and a shadow phase alike; a
refusal only the candidate makes (stable accepts the request) stays the candidate's error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.parts import Intervals
from infra.routing import RoutingState, save_state
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from tests.fakes.upstream import FakeUpstreamHandle, refuse_bad_stop, start_fake_upstream
from tests.helpers import wait_for_background

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "What is 53 * 47?"}]
BAD = {"messages": MESSAGES, "stop": [1]}  # vLLM refuses a stop list of numbers


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstreamHandle]]:
    handles = {v: start_fake_upstream(v) for v in ("v0", "v1")}
    yield handles
    for handle in handles.values():
        handle.stop()


def start(
    tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle], state: RoutingState
) -> GatewayHandle:
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(
            upstreams={v: h.url for v, h in upstreams.items()}, diverse_fraction=0.0
        ),
    )
    store = LocalStore(tmp_path / "store")
    save_state(store, state)
    return start_background_gateway(settings, port=0, store=store, intervals=Intervals(flush_s=0.1))


def series(gw: GatewayHandle) -> dict[str, float]:
    """Every sample the gateway counts (shadow ones included), by its exposition line."""
    text = gw.app.state.gateway.recorder.metrics.render().decode()
    pairs = (line.rpartition(" ") for line in text.splitlines() if not line.startswith("#"))
    return {name: float(value) for name, _, value in pairs}


def count(gw: GatewayHandle, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return series(gw).get(f"{name}{{{want}}}", 0.0)


def errors(gw: GatewayHandle, model: str, route: str) -> float:
    return count(gw, "agent_errors_total", model=model, route=route, workload="default")


def chat(gw: GatewayHandle, body: dict[str, Any], user: str, *, stream: bool) -> httpx.Response:
    payload = {**body, "user": user, "stream": stream}
    return httpx.post(f"{gw.url}/v1/chat/completions", json=payload, timeout=10)


def test_a_request_both_versions_refuse_is_the_clients_400_and_no_versions_error(
    tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle]
) -> None:
    for handle in upstreams.values():
        # as an upstream that names itself in its message: the client must never see where
        handle.app.refuse = lambda body, url=handle.url: (
            None if (why := refuse_bad_stop(body)) is None else f"{why} (served at {url})"
        )
    canary = RoutingState(stable="v0", candidate="v1", phase="canary", weight=50)
    with start(tmp_path, upstreams, canary) as gw:
        replies = [chat(gw, BAD, f"user-{i}", stream=i % 2 == 1) for i in range(40)]
        good = chat(gw, {"messages": MESSAGES}, "user-0", stream=False)
        assert upstreams["v1"].app.calls > 0  # some of the 40 were the canary's users
        assert [r.status_code for r in replies] == [400] * 40
        for reply in replies:
            message = reply.json()["error"]["message"]
            assert "Input should be a valid string" in message
            assert "127.0.0.1" not in message and "served at [upstream]" in message
        assert good.status_code == 200
        assert errors(gw, "v1", "canary") == 0
        assert errors(gw, "v0", "stable") == 0
        assert count(gw, "flywheel_client_refused_total", status="400") == 40


def test_a_refusal_only_the_canary_makes_is_the_canarys_error(
    tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle]
) -> None:
    # a candidate with a shorter context window, say: it refuses what stable accepts
    upstreams["v1"].app.fail_rate, upstreams["v1"].app.fail_status = 1.0, 400
    canary = RoutingState(stable="v0", candidate="v1", phase="canary", weight=100)
    with start(tmp_path, upstreams, canary) as gw:
        replies = [chat(gw, {"messages": MESSAGES}, f"u{i}", stream=i % 2 == 1) for i in range(6)]
        assert [r.status_code for r in replies] == [200] * 6  # stable answered them
        assert errors(gw, "v1", "canary") == 6
        assert count(gw, "flywheel_client_refused_total", status="400") == 0


@pytest.mark.parametrize("stable_refuses", [True, False], ids=["clients", "shadows"])
def test_a_shadow_refusal_is_the_shadows_error_only_when_stable_answered(
    tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle], stable_refuses: bool
) -> None:
    upstreams["v1"].app.refuse = lambda body: "context too long"
    if stable_refuses:
        upstreams["v0"].app.refuse = lambda body: "context too long"
    shadow = RoutingState(
        stable="v0", candidate="v1", phase="shadow", weight=0, shadow_fraction=1.0
    )
    with start(tmp_path, upstreams, shadow) as gw:
        replies = [chat(gw, {"messages": MESSAGES}, f"u{i}", stream=False) for i in range(5)]
        wait_for_background(gw)
        assert upstreams["v1"].app.calls == 5
        if stable_refuses:
            assert {r.status_code for r in replies} == {400}
            assert errors(gw, "v1", "shadow") == 0
        else:
            assert {r.status_code for r in replies} == {200}
            assert errors(gw, "v1", "shadow") == 5
