"""Canary and shadow routing through the running gateway (loopback, fake upstreams)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.parts import Intervals
from infra.routing import RoutingState, load_state, save_state
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from tests.fakes.loopback import Reply, post_many
from tests.fakes.upstream import EchoUpstream, FakeUpstreamHandle, start_fake_upstream

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]
TOKEN = "routing-admin-token-0123456789abcdef0123"
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}  # only its answers name the serving version


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstreamHandle]]:
    handles = {v: start_fake_upstream(v) for v in ("v0", "v1")}
    yield handles
    for handle in handles.values():
        handle.stop()


def start(
    tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle] | None, state: RoutingState
) -> GatewayHandle:
    """A gateway over HTTP fake upstreams, or over in-process ones (``upstreams=None``: cheaper
    where only the routing is under test)."""
    store = LocalStore(tmp_path / "store")
    save_state(store, state)
    urls = {v: h.url for v, h in (upstreams or {}).items()}
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(upstreams=urls, diverse_fraction=0, admin_token=TOKEN),
    )
    local = None if upstreams else {v: EchoUpstream(v) for v in ("v0", "v1")}
    return start_background_gateway(
        settings,
        port=0,
        store=store,
        upstreams=local,
        intervals=Intervals(state_s=0.1, flush_s=0.1),
    )


def ask_many(url: str, users: list[str], concurrency: int = 16) -> list[Reply]:
    """One request per user, as the operator (the replies name the version that served)."""
    bodies = [{"messages": MESSAGES, "user": u} for u in users]
    return asyncio.run(
        post_many(url, "/v1/chat/completions", bodies, concurrency=concurrency, headers=OPERATOR)
    )


def traces(tmp_path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in (tmp_path / "store" / "traces").rglob("*.jsonl")
        for line in path.read_text().splitlines()
        if '"type": "trace"' in line
    ]


def test_canary_weight_25_over_2000_users_is_sticky(tmp_path: Path) -> None:
    users = [f"user-{i}" for i in range(2000)]
    with start(tmp_path, None, RoutingState(candidate="v1", phase="canary", weight=25)) as gw:
        first = ask_many(str(gw.admin_url), users)
        again = ask_many(str(gw.admin_url), users[:300])
    assert all(r.status == 200 for r in first + again)
    served = {u: r.headers["x-flywheel-model"] for u, r in zip(users, first, strict=True)}
    share = Counter(served.values())["v1"] / len(users)
    assert 0.22 <= share <= 0.28
    assert {u: r.headers["x-flywheel-model"] for u, r in zip(users, again, strict=False)} == {
        u: served[u] for u in users[:300]
    }


def test_a_state_change_in_the_store_is_picked_up(tmp_path: Path, upstreams) -> None:
    store = LocalStore(tmp_path / "store")
    with start(tmp_path, upstreams, RoutingState()) as gw:
        assert {
            r.headers["x-flywheel-model"] for r in (ask_many(str(gw.admin_url), ["a", "b"]))
        } == {"v0"}
        state = load_state(store)
        save_state(store, state.model_copy(update={"candidate": "v1", "weight": 100.0}))
        deadline = time.monotonic() + 5
        while (
            httpx.get(f"{gw.admin_url}/admin/state", headers=OPERATOR).json()["candidate"] != "v1"
        ):
            assert time.monotonic() < deadline, "the gateway did not pick up deploy/state.json"
            time.sleep(0.05)
        assert {
            r.headers["x-flywheel-model"] for r in (ask_many(str(gw.admin_url), ["a", "b"]))
        } == {"v1"}


def test_shadow_users_get_stable_answers_without_waiting(tmp_path: Path, upstreams) -> None:
    upstreams["v1"].app.delay_s = 1.0  # the candidate is slow (its traces say so)
    held = upstreams["v1"].app.hold = threading.Event()  # and answers only once let go
    safety = threading.Timer(120, held.set)  # a gateway that waited would still end
    state = RoutingState(candidate="v1", phase="shadow", shadow_fraction=1.0)
    with start(tmp_path, upstreams, state) as gw:
        safety.start()
        try:
            replies = ask_many(str(gw.admin_url), [f"u{i}" for i in range(10)], concurrency=10)
            # every user has an answer while no shadow copy has been answered yet
            assert upstreams["v1"].app.released == 0, "users waited for the shadow"
        finally:
            held.set()
            safety.cancel()
        assert all(r.status == 200 and r.headers["x-flywheel-model"] == "v0" for r in replies)
        assert all(r.json()["model"] == "flywheel" for r in replies)  # as the users asked
        # the shadow copies finish once let go and the sink writes them: waited for, bounded
        deadline = time.monotonic() + 30
        while True:
            time.sleep(0.2)
            found = traces(tmp_path)
            stable = {t["pairing_id"]: t for t in found if t["route"] == "stable"}
            shadow = {t["pairing_id"]: t for t in found if t["route"] == "shadow"}
            if len(shadow) >= 10 or time.monotonic() > deadline:
                break
    assert len(stable) == len(shadow) == 10 and stable.keys() == shadow.keys()
    returned = {r.headers["x-trace-id"] for r in replies}
    assert {t["trace_id"] for t in stable.values()} == returned
    for pid, t in shadow.items():
        assert t["model_version"] == "v1" and t["question"] == stable[pid]["question"]
        assert t["latency_s"] >= 1.0 > stable[pid]["latency_s"]
