"""Request bodies that try to hold the gateway, on loopback: clients that send a head and then
stall in the body (more of them than the connection cap). Each is refused, and the other
clients keep being served (asserted by what they receive, never by a clock)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from infra.gateway import GatewayHandle, start_background_gateway
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from tests.fakes.upstream import FakeUpstreamHandle, start_fake_upstream

pytestmark = pytest.mark.integration

CHAT = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
HEAD_LENGTH = CHAT + b"Content-Length: 1000\r\n\r\n"  # a body of 1000 bytes is promised
HEAD_CHUNKED = CHAT + b"Transfer-Encoding: chunked\r\n\r\n"


@pytest.fixture
def upstream() -> Iterator[FakeUpstreamHandle]:
    handle = start_fake_upstream("v0")
    yield handle
    handle.stop()


def start(tmp_path: Path, upstream: FakeUpstreamHandle, **gw: Any) -> GatewayHandle:
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(upstreams={"v0": upstream.url}, diverse_fraction=0.0, **gw),
    )
    return start_background_gateway(settings, port=0, store=LocalStore(tmp_path / "store"))


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=20)
    return sock


def read_to_eof(sock: socket.socket) -> bytes:
    """What the gateway sent until it closed the connection (a socket timeout fails)."""
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
    return data


def chat_until_served(url: str) -> httpx.Response:
    """A plain chat request, sent again while the gateway is at its connection cap (503, as a
    client honouring Retry-After would); bounded."""
    body = {"messages": [{"role": "user", "content": "hi"}]}
    deadline = time.monotonic() + 20
    while True:
        resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=20)
        if resp.status_code != 503 or time.monotonic() > deadline:
            return resp
        time.sleep(0.05)


def test_clients_stalling_in_their_body_are_dropped_and_their_slots_freed(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    gw_limits = {"max_connections": 4, "body_timeout_s": 0.5, "header_timeout_s": 60}
    with start(tmp_path, upstream, **gw_limits) as gw:
        stalled = [connect(gw.url) for _ in range(6)]  # two more than the cap
        for n, sock in enumerate(stalled):
            # a head, then a body that stops short: by its length, or inside a chunk
            first = HEAD_CHUNKED + b"40\r\n{" if n % 2 else HEAD_LENGTH + b'{"messages": ['
            sock.sendall(first)
        answers = sorted(read_to_eof(sock)[:12] for sock in stalled)
        for sock in stalled:
            sock.close()
        assert answers == [b"HTTP/1.1 408"] * 4 + [b"HTTP/1.1 503"] * 2
        served = chat_until_served(gw.url)
        assert served.status_code == 200 and served.json()["choices"][0]["message"]["content"]
    assert upstream.app.calls == 1  # no stalled body ever reached the model
