"""One key for routing and voice, through the real gateway: a client that sends no ``user``
(most apps on the openai SDK) sees one version for the whole canary step and is one voice in
it; behind a trusted proxy each forwarded client is its own; a client that is no trusted proxy
cannot rotate ``X-Forwarded-For`` into many routes or many voices."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest

from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.cohorts import bucket
from infra.gateway.parts import Intervals
from infra.gateway.requester import key_of, routing_secret
from infra.routing import RoutingState, save_state
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from tests.fakes.upstream import EchoUpstream

pytestmark = pytest.mark.integration

TOKEN = "routing-key-admin-token-0123456789abcdef"
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}  # the answer names its version (operator only)
BODY = {"model": "flywheel", "messages": [{"role": "user", "content": "What is 23 + 58?"}]}
HALF = RoutingState(stable="v0", candidate="v1", phase="canary", weight=50)


def start(tmp_path: Path, **gateway: Any) -> GatewayHandle:
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(admin_token=TOKEN, diverse_fraction=0, **gateway),
    )
    store = LocalStore(tmp_path / "store")
    save_state(store, HALF)
    upstreams = {v: EchoUpstream(v) for v in ("v0", "v1")}
    return start_background_gateway(
        settings, port=0, store=store, upstreams=upstreams, intervals=Intervals(state_s=0.1)
    )


def ask(client: httpx.Client, gw: GatewayHandle, **headers: str) -> str:
    reply = client.post(
        f"{gw.admin_url}/v1/chat/completions", json=BODY, headers=OPERATOR | headers
    )
    assert reply.status_code == 200, reply.text
    return reply.headers["x-flywheel-model"]


def voices(gw: GatewayHandle) -> float:
    """Users the canary's tests would hear in this step, both versions together."""
    registry = gw.app.state.parts.metrics.registry
    return sum(
        registry.get_sample_value(
            "agent_voices_total", {"model": m, "route": r, "workload": "default"}
        )
        or 0.0
        for m, r in (("v0", "stable"), ("v1", "canary"))
    )


def test_a_client_without_user_sees_one_version_for_the_step(tmp_path: Path) -> None:
    """It once met stable 16 times and the candidate 24 of 40, and was a voice in each arm."""
    with start(tmp_path) as gw, httpx.Client(timeout=10) as client:
        served = Counter(ask(client, gw) for _ in range(40))
        assert len(served) == 1, served
        assert voices(gw) == 1
    # the version is the one its address's bucket names, under the deployment's secret
    settings = Settings(home=tmp_path)
    key = key_of(client="127.0.0.1")
    assert key is not None
    cohort = bucket(key, salt="v1", secret=routing_secret(settings.salt())) < 5000
    assert served == Counter({"v1" if cohort else "v0": 40})


def test_behind_a_trusted_proxy_each_forwarded_client_is_one_route_and_one_voice(
    tmp_path: Path,
) -> None:
    with start(tmp_path, trusted_proxies=["127.0.0.0/8"]) as gw, httpx.Client(timeout=10) as c:
        seen: dict[str, set[str]] = defaultdict(set)
        for round_ in range(4):
            for i in range(20):
                # what the client claimed, then the address the proxy saw
                chain = f"198.51.100.{round_}, 203.0.113.{i}"
                seen[f"203.0.113.{i}"].add(ask(c, gw, **{"X-Forwarded-For": chain}))
        assert all(len(v) == 1 for v in seen.values()), seen
        arms = Counter(next(iter(v)) for v in seen.values())
        assert set(arms) == {"v0", "v1"}, arms  # 20 clients, not one: both arms get some
        assert voices(gw) == 20


def test_an_untrusted_client_rotating_x_forwarded_for_is_still_one_client(
    tmp_path: Path,
) -> None:
    """No proxy is trusted (the default, loopback included): the header is the client's own
    invention, and forty invented addresses are one route and one voice."""
    with start(tmp_path) as gw, httpx.Client(timeout=10) as client:
        served = Counter(
            ask(client, gw, **{"X-Forwarded-For": f"203.0.113.{i}"}) for i in range(40)
        )
        assert len(served) == 1, served
        assert voices(gw) == 1
