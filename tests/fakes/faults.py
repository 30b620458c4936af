"""A fault-injecting HTTP proxy on loopback: it forwards to one upstream (an S3 server, the
judge, Langfuse) and fails a seeded share of the calls the ways a real dependency fails.

Faults, drawn per request from ``random.Random(seed)``:

- ``before``: answers 503 (an S3-style ``ServiceUnavailable`` body) without forwarding;
- ``after``: forwards, so the upstream applies the call, then answers 503 anyway (the nasty
  case: a retry must be safe against a write that did happen);
- ``reset``: closes the connection without an answer (a dropped connection or a time-out);
- ``throttle``: answers 429 with ``Retry-After: 0`` without forwarding (a rate limit);
- ``slow``: waits ``slow_s`` before answering 503 (a client with a shorter time-out sees a
  time-out).

``faults`` counts what was injected by kind (at most ``max_faults`` in all), ``forwarded`` the
calls the upstream saw. An :class:`Aim` limits the faults to some methods or paths.
"""

from __future__ import annotations

import http.client
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

S3_UNAVAILABLE = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ServiceUnavailable</Code>'
    b"<Message>injected fault</Message></Error>"
)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass(frozen=True)
class Aim:
    """Which calls may fail: these methods (None: any), whose path contains ``paths`` (None:
    any path; ``/_locks/`` aims at the store's leases, ``/warehouse/flywheel/`` at the tables'
    files)."""

    methods: frozenset[str] | None = None
    paths: str | None = None

    def hits(self, method: str, path: str) -> bool:
        """Whether a call of ``method`` to ``path`` may fail."""
        return (self.methods is None or method in self.methods) and (
            self.paths is None or self.paths in path
        )


class FaultProxy:
    """The proxy's configuration and counters (shared by its handler threads)."""

    def __init__(
        self,
        upstream: str,
        *,
        rate: float,
        seed: int,
        kinds: tuple[str, ...] = ("before", "after", "reset"),
        slow_s: float = 0.0,
        body: bytes = S3_UNAVAILABLE,
        aim: Aim = Aim(),
        max_faults: int | None = None,
    ) -> None:
        parsed = urlparse(upstream)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.rate, self.kinds, self.slow_s, self.body = rate, kinds, slow_s, body
        self.aim = aim
        self.max_faults = max_faults  # None: no limit
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.faults: Counter[str] = Counter()
        self.forwarded = 0
        self.enabled = True
        self.url = ""

    def draw(self, method: str, path: str = "") -> str | None:
        """The fault for the next call, or None to pass it through."""
        with self._lock:
            roll, kind = self._rng.random(), self._rng.choice(self.kinds)
            if not self.enabled or roll >= self.rate:
                return None
            if not self.aim.hits(method, path):
                return None
            if self.max_faults is not None and sum(self.faults.values()) >= self.max_faults:
                return None
            self.faults[kind] += 1
            return kind

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
        """The upstream's answer: (status, headers, body)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            conn.request(method, path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            with self._lock:
                self.forwarded += 1
            return resp.status, resp.getheaders(), data
        finally:
            conn.close()


class _Handler(BaseHTTPRequestHandler):
    """The proxy's request handler (its :class:`FaultProxy` set by :func:`_handler`)."""

    protocol_version = "HTTP/1.1"
    proxy: FaultProxy

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _fail(self, status: int = 503) -> None:
        self.send_response(status)
        if status == 429:
            self.send_header("Retry-After", "0")
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(self.proxy.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(self.proxy.body)

    def _relay(self) -> None:
        try:
            self._answer()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up first
            self.close_connection = True

    def _answer(self) -> None:
        body = self._body()
        kind = self.proxy.draw(self.command, self.path)
        if kind == "reset":
            self.close_connection = True
            return
        if kind == "throttle":
            self._fail(429)
            return
        if kind == "slow":
            time.sleep(self.proxy.slow_s)
        if kind in ("before", "slow"):
            self._fail()
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if body:
            headers["Content-Length"] = str(len(body))
        status, answer_headers, data = self.proxy.forward(self.command, self.path, headers, body)
        if kind == "after":
            self._fail()
            return
        self.send_response(status)
        head = self.command == "HEAD"  # the upstream's Content-Length: the object's size
        for key, value in answer_headers:
            if key.lower() not in HOP_BY_HOP and (head or key.lower() != "content-length"):
                self.send_header(key, value)
        if not head:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _relay


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    """A handler class bound to ``proxy`` (the server makes one handler per request)."""
    return type("Handler", (_Handler,), {"proxy": proxy})


@contextmanager
def fault_proxy(upstream: str, **options: Any) -> Iterator[FaultProxy]:
    """A :class:`FaultProxy` listening on a free loopback port (``proxy.url``) until the block
    ends."""
    proxy = FaultProxy(upstream, **options)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    server.daemon_threads = True
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
