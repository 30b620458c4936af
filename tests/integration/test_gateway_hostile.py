"""Clients that try to stall or exhaust the gateway, on loopback: streaming clients that stop
reading, a request head that never ends or never comes, more connections than allowed, a
4 MiB request of many messages, a trace padded outside its text fields. Each is bounded and
the other clients keep being served (asserted by what they receive, never by a clock)."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.parts import Intervals
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from tests.fakes.upstream import FakeUpstreamHandle, long_for_long, start_fake_upstream

pytestmark = pytest.mark.integration

TOKEN = "hostile-admin-token-0123456789abcdef0123456789"


@pytest.fixture
def upstream() -> Iterator[FakeUpstreamHandle]:
    handle = start_fake_upstream("v0", answer=long_for_long)
    yield handle
    handle.stop()


def start(tmp_path: Path, upstream: FakeUpstreamHandle, **gw: Any) -> GatewayHandle:
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(
            upstreams={"v0": upstream.url},
            admin_token=SecretStr(TOKEN),
            **{"diverse_fraction": 0.0, **gw},
        ),
    )
    return start_background_gateway(
        settings, port=0, store=LocalStore(tmp_path / "store"), intervals=Intervals(flush_s=0.1)
    )


def connect(url: str, *, rcvbuf: int | None = None, source: str | None = None) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if source is not None:  # another loopback address: another client
        sock.bind((source, 0))
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(30)
    sock.connect((host, int(port)))
    return sock


def post_head(body: bytes) -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def read_to_eof(sock: socket.socket) -> bytes:
    """What the gateway sent until it closed the connection (a socket timeout fails)."""
    data = b""
    while chunk := sock.recv(1 << 20):
        data += chunk
    return data


def test_streaming_clients_that_stop_reading_are_dropped_and_free_the_pool(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    """Ten clients start an 8 MB stream each and read nothing more, against a pool of four
    upstream connections: each is dropped once stalled, and a plain request is answered."""
    body = json.dumps({"messages": [{"role": "user", "content": "long"}], "stream": True})
    with start(tmp_path, upstream, upstream_connections=4, stall_timeout_s=0.5) as gw:
        stalled = [connect(gw.url, rcvbuf=4096) for _ in range(10)]
        for sock in stalled:
            sock.sendall(post_head(body.encode()))
        for sock in stalled:
            assert sock.recv(12) == b"HTTP/1.1 200"  # then it reads nothing for a while
        plain = {"messages": [{"role": "user", "content": "hi"}]}
        resp = httpx.post(f"{gw.url}/v1/chat/completions", json=plain, timeout=60)
        assert resp.status_code == 200 and resp.json()["choices"][0]["message"]["content"] == (
            "echo: hi"
        )
        # read nothing until every stalled stream has reached the upstream (a pool connection
        # freed by an earlier drop) and has had several stall periods to be dropped: reading
        # a stream still in flight would drain it to the end
        deadline = time.monotonic() + 60
        while upstream.app.calls < 11 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert upstream.app.calls >= 11, upstream.app.calls
        time.sleep(10 * 0.5)
        for sock in stalled:  # each was dropped: its stream ends short of its 8 MB, no [DONE]
            received = read_to_eof(sock)
            assert b"data: [DONE]" not in received and len(received) < 8 * 65536 * 16
            sock.close()
        again = httpx.post(f"{gw.url}/v1/chat/completions", json=plain, timeout=60)
        assert again.status_code == 200


def test_a_head_too_large_is_431_and_one_that_never_comes_is_closed(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    with start(tmp_path, upstream, max_header_bytes=8192, header_timeout_s=0.5) as gw:
        big = connect(gw.url)
        big.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 100_000 + b"\r\n\r\n")
        assert read_to_eof(big).startswith(b"HTTP/1.1 431")
        # a lingering close (RFC 9112 section 9.6): after the 431 the gateway half-closes and
        # goes on reading, so what the client still sends draws no reset (a reset that arrives
        # before the client has read the 431 can erase it). Closed at once, the second send
        # here fails
        for _ in range(3):
            big.sendall(b"p" * 65536)
            time.sleep(0.05)
        big.close()
        silent, slow = connect(gw.url), connect(gw.url)
        slow.sendall(b"GET /livez HTTP/1.1\r\n")  # and the rest never
        assert read_to_eof(silent) == b"" and read_to_eof(slow) == b""  # closed by the gateway
        assert httpx.get(f"{gw.url}/livez").status_code == 200


def test_connections_beyond_the_limit_get_503_and_the_admin_listener_still_answers(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    with start(tmp_path, upstream, max_connections=3, header_timeout_s=30) as gw:
        held = [connect(gw.url) for _ in range(3)]
        held[0].sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        assert held[0].recv(12) == b"HTTP/1.1 200"  # the three are served
        extra = connect(gw.url)
        assert read_to_eof(extra).startswith(b"HTTP/1.1 503")
        assert gw.admin_url is not None
        state = httpx.get(f"{gw.admin_url}/admin/state", headers=_auth(), timeout=10)
        assert state.status_code == 200  # a rollback webhook is never turned away
        for sock in held:
            sock.close()
        assert httpx.get(f"{gw.url}/livez", timeout=10).status_code == 200


def test_one_client_cannot_hold_every_connection_slot(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    """One peer address holding its share of connections gets 503 for the next, while another
    client (another loopback address) is served; closing them gives the first its slots back."""
    with start(
        tmp_path, upstream, max_connections=10, max_connections_per_client=3, header_timeout_s=30
    ) as gw:
        held = [connect(gw.url) for _ in range(3)]
        held[0].sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        assert held[0].recv(12) == b"HTTP/1.1 200"
        assert read_to_eof(connect(gw.url)).startswith(b"HTTP/1.1 503")
        other = connect(gw.url, source="127.0.0.2")
        other.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert read_to_eof(other).startswith(b"HTTP/1.1 200")
        for sock in held:
            sock.close()
        assert httpx.get(f"{gw.url}/livez", timeout=10).status_code == 200
        assert refused(gw.url) == {"client": 1.0}  # the operator sees the gateway shed load


def test_a_gateway_full_of_connections_refuses_the_next_and_counts_it(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    with start(
        tmp_path, upstream, max_connections=2, max_connections_per_client=0, header_timeout_s=30
    ) as gw:
        held = [connect(gw.url, source=f"127.0.0.{i}") for i in (2, 3)]
        held[1].sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        assert held[1].recv(12) == b"HTTP/1.1 200"  # both are counted by now
        assert read_to_eof(connect(gw.url, source="127.0.0.4")).startswith(b"HTTP/1.1 503")
        for sock in held:
            sock.close()
        assert httpx.get(f"{gw.url}/livez", timeout=10).status_code == 200
        assert refused(gw.url) == {"total": 1.0}


def refused(url: str) -> dict[str, float]:
    """``flywheel_connections_refused_total`` by ``limit``."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.findall(r'^flywheel_connections_refused_total\{limit="(\w+)"\} (\S+)$', text, re.M)
    return {limit: float(value) for limit, value in found}


def test_websocket_upgrades_return_their_connection_slots(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    """An unauthenticated client that asks to upgrade to WebSocket as often as the public
    listener takes connections (and keeps each socket open) gets an answer and a closed
    connection every time: later clients, /healthz included, are still served."""
    upgrade = (
        b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
        b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    with start(tmp_path, upstream, max_connections=3, header_timeout_s=30) as gw:
        for _ in range(3):
            held = [connect(gw.url) for _ in range(3)]
            for sock in held:
                sock.sendall(upgrade)
            answers = [read_to_eof(sock) for sock in held]  # the gateway closes them
            assert all(a.startswith(b"HTTP/1.1 4") for a in answers), answers
            assert not any(b"101 Switching" in a for a in answers)
            for sock in held:
                sock.close()
        assert httpx.get(f"{gw.url}/healthz", timeout=10).status_code == 200


def test_a_4mib_request_of_many_messages_is_answered_and_livez_meanwhile(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    """Over the message cap: a 400 naming it; under it (1000 messages of 4 KB): answered,
    the trace capped. /livez is answered on the same listener between them."""
    tiny = [{"role": "user", "content": "x"}] * 120_000
    with (
        start(tmp_path, upstream, max_messages=1024, max_trace_chars=4000) as gw,
        httpx.Client(base_url=gw.url, timeout=60) as client,
    ):
        refused = client.post("/v1/chat/completions", json={"messages": tiny})
        assert refused.status_code == 400 and "MAX_MESSAGES" in refused.text
        assert client.get("/livez").status_code == 200
        many = [{"role": "user", "content": f"{n} " + "y" * 4000} for n in range(1000)]
        body = json.dumps({"messages": many})
        assert 3.5 * 2**20 < len(body) < 4 * 2**20
        answered = client.post("/v1/chat/completions", content=body)
        assert answered.status_code == 200
        assert answered.json()["choices"][0]["message"]["content"].startswith("echo: 999 ")
        assert client.get("/livez").status_code == 200
    lines = [
        line
        for path in (tmp_path / "store" / "traces").rglob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert lines and all(len(line) <= 10 * 4000 + 2000 for line in lines)


def test_the_trace_cap_holds_for_parts_extra_keys_user_and_session(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    """The padding a security review used to make a 964,574-character trace line out of a
    32,000-character cap: every place of a request now counts against one record cap."""
    pad = "z" * 200_000
    messages = [
        {"role": "system", "content": [{"type": "text", "text": pad}] * 2, "extra": pad},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:" + pad}}]},
        {"role": "user", "content": "question", "name": pad, "padding": [pad]},
    ]
    with start(tmp_path, upstream, max_trace_chars=3000, allow_media=True) as gw:
        body = {"messages": messages, "user": "u" * 200, "metadata": {"workload": pad}}
        headers = {"X-Session-Id": "s" * 200}
        resp = httpx.post(f"{gw.url}/v1/chat/completions", json=body, headers=headers)
        assert resp.status_code == 200
        too_long = {**body, "user": "u" * 5000}
        assert httpx.post(f"{gw.url}/v1/chat/completions", json=too_long).status_code == 400
    [line] = [
        line
        for path in (tmp_path / "store" / "traces").rglob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert len(line) <= 10 * 3000 + 2000 and pad[:5000] not in line


def test_deeply_nested_json_is_a_400_on_every_endpoint(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    nested = "[" * 100_000 + "]" * 100_000
    moderate = '{"messages": [{"role": "user", "content": ' + "[" * 200 + "]" * 200 + "}]}"
    headers = {**_auth(), "Content-Type": "application/json"}
    with start(tmp_path, upstream) as gw:
        assert gw.admin_url is not None
        for url in (
            f"{gw.url}/v1/chat/completions",
            f"{gw.url}/v1/feedback",
            f"{gw.admin_url}/admin/state",
            f"{gw.admin_url}/admin/rollback",
            f"{gw.admin_url}/admin/alerts",
        ):
            assert httpx.post(url, content=nested, headers=headers).status_code == 400, url
        chat = httpx.post(f"{gw.url}/v1/chat/completions", content=moderate, headers=headers)
        assert chat.status_code == 400 and "nested" in chat.text
    assert upstream.app.calls == 0


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}
