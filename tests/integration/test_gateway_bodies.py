"""Request bodies that try to hold the gateway, on loopback: clients that send a head and then
stall in the body (more of them than the connection cap), and bodies of a million tiny nested
lists sent at once. Each is refused, and the other clients keep being served (asserted by what
they receive and by /livez's gaps compared with its gaps in the same run, never by a clock)."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
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


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def connect(url: str) -> socket.socket:
    return socket.create_connection(address(url), timeout=20)


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


def chat_on(conn: http.client.HTTPConnection) -> int:
    """One chat request on ``conn`` (kept alive); its status."""
    body = orjson.dumps({"messages": [{"role": "user", "content": "hi"}]})
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    return resp.status


def test_a_keep_alive_connection_idle_longer_than_clients_keep_theirs_is_still_served(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    # httpx and the openai SDK drop an idle pooled connection after 5 s; a gateway closing at
    # 5 s too (uvicorn's default) races them under load: the client reuses the connection as
    # the gateway closes it and gets a reset for a request it already sent
    with start(tmp_path, upstream) as gw:
        conn = http.client.HTTPConnection(*address(gw.url), timeout=20)
        assert chat_on(conn) == 200
        sock = conn.sock
        time.sleep(6.5)  # idle past every client's 5 s
        assert chat_on(conn) == 200
        assert conn.sock is sock  # the same connection, not a new one
        conn.close()
    with start(tmp_path / "short", upstream, keep_alive_s=0.5) as gw:  # the setting is read
        conn = http.client.HTTPConnection(*address(gw.url), timeout=20)
        assert chat_on(conn) == 200
        time.sleep(2.0)
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            chat_on(conn)
        conn.close()


class Probes:
    """``GET /livez`` on one keep-alive connection, one after another, each answer's arrival
    noted."""

    def __init__(self, url: str) -> None:
        self.sock = connect(url)
        self.arrivals: list[float] = []
        self.statuses: set[bytes] = set()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.sock.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while not answer.endswith(b'{"status":"ok"}'):
                chunk = self.sock.recv(4096)
                if not chunk:
                    raise ConnectionError("the gateway closed the probe's connection")
                answer += chunk
            self.statuses.add(answer[:12])
            self.arrivals.append(time.perf_counter())

    def longest_gap(self) -> float:
        times = self.arrivals
        return max(b - a for a, b in zip(times, times[1:], strict=False))


def send(url: str, body: bytes, into: list[bytes]) -> None:
    with connect(url) as sock:
        head = CHAT + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
        sock.sendall(head + body)
        into.append(read_to_eof(sock))


def storm(url: str, bodies: list[bytes]) -> tuple[float, list[bytes]]:
    """``bodies`` sent at once while /livez is probed: the longest wait between two probe
    answers, and what each body got (every probe must have been answered with 200)."""
    probes = Probes(url)
    prober = threading.Thread(target=probes.run, daemon=True)
    prober.start()
    answers: list[bytes] = []
    senders = [threading.Thread(target=send, args=(url, body, answers)) for body in bodies]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(120)
    probes.stop.set()
    prober.join(30)
    probes.sock.close()
    assert probes.statuses == {b"HTTP/1.1 200"} and len(probes.arrivals) > 2
    return probes.longest_gap(), answers


def test_bodies_of_a_million_tiny_lists_get_400_while_livez_keeps_answering(
    tmp_path: Path, upstream: FakeUpstreamHandle
) -> None:
    """Eight such bodies at once, against eight as large with no nesting (a long string in a
    field the gateway drops: read, parsed, answered) in the same run. The longest /livez gap
    of each kind is taken as the least of three rounds, so that a spike of the machine's load
    in one round does not decide; a parse on the event loop stalls every round."""
    prefix = b'{"messages": [{"role": "user", "content": "hi"}], "x": '
    lists = b"[" + b",".join([b"[]"] * 1_300_000) + b"]"  # 3.9 MB of empty lists
    deep = prefix + b"[" * 40 + lists + b"]" * 40 + b"}"
    wide = prefix + lists + b"}"
    plain = prefix + b'"' + b"a" * len(lists) + b'"}'
    assert max(len(deep), len(wide)) < 4 * 2**20  # under the body limit: they get parsed
    with start(tmp_path, upstream) as gw:
        storm(gw.url, [plain] * 8)  # the first scans and parses of the run: not measured
        calm, stormy = [], []
        for _ in range(3):
            gap, answers = storm(gw.url, [plain] * 8)
            assert sorted(a[:12] for a in answers) == [b"HTTP/1.1 200"] * 8
            calm.append(gap)
            gap, answers = storm(gw.url, [deep, wide] * 4)
            assert len(answers) == 8
            for answer in answers:
                head, _, body = answer.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 400"), head
                assert orjson.loads(body)["error"]["message"] in (
                    "the body is nested deeper than 32 levels",
                    "the body holds more than 65536 JSON arrays and objects",
                )
            stormy.append(gap)
    print(f"\n/livez longest gaps: plain {calm}, nested {stormy} (s)")
    # generous: the loop shares its cores with the uploads, but never stops for a parse
    assert min(stormy) < 10 * min(calm), (stormy, calm)
    assert upstream.app.calls == 3 * 8 + 8  # the plain ones only
