"""What a public client can learn of a release: answers that are the same whichever version
served them (headers, ``model``, stream chunks), and a ``/metrics`` that names no version no
public client was routed to. The operator (admin token, admin listener) sees more."""

from __future__ import annotations

import json
import time
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
from tests.fakes.upstream import FakeUpstreamHandle, start_fake_upstream
from tests.helpers import wait_for_background

pytestmark = pytest.mark.integration

TOKEN = "public-view-admin-token-0123456789abcdef"
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}
MESSAGES = [{"role": "user", "content": "What is 53 * 47?"}]
VARYING = ("id", "created")  # per answer, whoever served it


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstreamHandle]]:
    # both versions give the same answer: only what the gateway adds could tell them apart
    handles = {v: start_fake_upstream(v) for v in ("v0", "v1", "v2")}
    yield handles
    for handle in handles.values():
        handle.stop()


def start(
    tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle], state: RoutingState
) -> GatewayHandle:
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(
            upstreams={v: h.url for v, h in upstreams.items()},
            diverse_fraction=0.0,
            admin_token=TOKEN,
        ),
    )
    store = LocalStore(tmp_path / "store")
    save_state(store, state)
    return start_background_gateway(settings, port=0, store=store, intervals=Intervals(flush_s=0.1))


def public_view(reply: httpx.Response, *, stream: bool) -> tuple[Any, ...]:
    """All a client sees of one answer, less what differs per answer anyway (ids, dates,
    lengths, the trace id's value)."""
    names = tuple(sorted(set(reply.headers) - {"date", "content-length"}))
    if not stream:
        body = {k: v for k, v in reply.json().items() if k not in VARYING}
        return names, json.dumps(body, sort_keys=True)
    events = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    # where a chunk ends follows the reads of the upstream's stream (events that arrive in one
    # read go out as one chunk: infra/upstream/completion.py), so it differs per answer: the
    # text is compared whole, and every chunk's fields, less its text, one by one
    text = "".join(ch["delta"].get("content") or "" for c in chunks for ch in c["choices"])
    shapes = {json.dumps(_without_text(c), sort_keys=True) for c in chunks}
    return names, text, json.dumps(sorted(shapes)), events[-1]


def _without_text(chunk: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in chunk.items() if k not in VARYING}
    kept["choices"] = [
        {**ch, "delta": {k: "" if k == "content" else v for k, v in ch["delta"].items()}}
        for ch in chunk["choices"]
    ]
    return kept


def test_a_public_answer_is_the_same_whichever_version_served_it(
    tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle]
) -> None:
    canary = RoutingState(stable="v0", candidate="v1", phase="canary", weight=50)
    with start(tmp_path, upstreams, canary) as gw:
        views: dict[bool, set[tuple[Any, ...]]] = {False: set(), True: set()}
        for i in range(24):
            stream = i % 2 == 1
            body = {"messages": MESSAGES, "user": f"user-{i}", "stream": stream}
            reply = httpx.post(f"{gw.url}/v1/chat/completions", json=body, timeout=10)
            assert reply.status_code == 200
            views[stream].add(public_view(reply, stream=stream))
        operator = httpx.post(
            f"{gw.admin_url}/v1/chat/completions", json={"messages": MESSAGES}, headers=OPERATOR
        )
    assert upstreams["v0"].app.calls > 0 and upstreams["v1"].app.calls > 0  # both served
    assert len(views[False]) == 1, views[False]  # one look, whoever served
    assert len(views[True]) == 1, views[True]
    [(names, body)] = views[False]
    assert "x-trace-id" in names and not any(n.startswith("x-flywheel") for n in names)
    assert json.loads(body)["model"] == "flywheel"  # the model the clients asked for
    [(_, text, shapes, _)] = views[True]
    assert text and {json.loads(c)["model"] for c in json.loads(shapes)} == {"flywheel"}
    assert operator.headers["x-flywheel-model"] in ("v0", "v1")  # the operator may know
    assert operator.headers["x-flywheel-route"] in ("stable", "canary")


def test_the_public_metrics_name_no_candidate_route_or_weight(
    tmp_path: Path, upstreams: dict[str, FakeUpstreamHandle]
) -> None:
    """A client that read the candidate and its weight off /metrics could aim its votes at the
    canary: the public exposition names the stable version alone, the embedded canary
    analysis reads the admin listener's."""
    from infra.metrics.promql_embedded import EmbeddedMetrics

    store = LocalStore(tmp_path / "store")
    shadow = RoutingState(stable="v0", candidate="v1", phase="shadow", shadow_fraction=1.0)
    with start(tmp_path, upstreams, shadow) as gw:
        url = f"{gw.url}/v1/chat/completions"
        assert gw.admin_url is not None
        reader = EmbeddedMetrics.from_url(gw.admin_url, token=TOKEN)  # the embedded analysis
        since = reader.mark()
        for i in range(6):
            assert httpx.post(url, json={"messages": MESSAGES, "user": f"u{i}"}).status_code == 200
        pinned = {"model": "v2", "messages": MESSAGES}  # an operator's look at another one
        operator_url = f"{gw.admin_url}/v1/chat/completions"
        assert httpx.post(operator_url, json=pinned, headers=OPERATOR).status_code == 200
        wait_for_background(gw)
        public = httpx.get(f"{gw.url}/metrics").text
        full = httpx.get(f"{gw.admin_url}/admin/metrics", headers=OPERATOR).text
        unauthorised = httpx.get(f"{gw.admin_url}/admin/metrics").status_code
        assert "route=" not in public and "flywheel_route_weight" not in public
        assert '"v1"' not in public and '"v2"' not in public  # in no series at all
        assert "flywheel_trace_sink_dropped_total" in public  # what the public may watch
        assert 'agent_requests_total{model="v1",route="shadow",workload="default"} 6.0' in full
        assert 'agent_requests_total{model="v2",route="pinned",workload="default"} 1.0' in full
        assert 'flywheel_route_weight{model="v1"} 0.0' in full
        assert unauthorised == 401
        # the canary: users reach v1 now; the public sees no more of it than before
        canary = RoutingState(stable="v0", candidate="v1", phase="canary", weight=100)
        save_state(store, canary, force=True)
        deadline = time.monotonic() + 10
        while gw.app.state.parts.watcher.state.weight != 100:
            assert time.monotonic() < deadline, "the gateway did not pick up the canary"
            time.sleep(0.05)
        for i in range(4):
            assert httpx.post(url, json={"messages": MESSAGES, "user": f"u{i}"}).status_code == 200
        window = reader.read(candidate="v1", stable="v0", since=since)
        public = httpx.get(f"{gw.url}/metrics").text
        health = httpx.get(f"{gw.url}/healthz").json()
    assert (window.candidate.requests, window.stable.requests) == (4, 6)
    assert '"v1"' not in public and "100.0" not in public and "route=" not in public
    assert health == {"status": "ok", "stable": "v0"}
