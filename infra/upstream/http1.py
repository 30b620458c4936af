"""The HTTP/1.1 client of the gateway and the release gate: keep-alive connections per origin,
answers parsed by httptools (the C parser uvicorn uses), a few times cheaper per call than a
general-purpose client.

Does: http and https (TLS verified); bodies by ``Content-Length``, chunks or connection close;
at most ``limit`` connections per origin (callers beyond wait); idle ones dropped after
``IDLE_S`` (uvicorn, vLLM's server, closes them at 5 s). One deadline per call covers the wait
for a connection, the connect, the answer and, for a stream, its whole body; a stream whose
deadline passes gives its connection back at once (its reader may be stuck on a slow client).
A request that may have reached the server is never sent again (only a ``GET`` on a kept-alive
connection closed before any byte of answer is); 1xx answers are skipped; every exchange has a
parser of its own; response headers and bodies are size-limited against a misbehaving server.
Does not: proxies, redirects, cookies, compression. Failures are :class:`HttpError`, whose
message names neither the request's content nor the server's address.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httptools

IDLE_S = 4.0  # an idle connection older than this is not reused (uvicorn closes them at 5 s)
CONNECT_TIMEOUT_S = 5.0
HIGH_WATER = 256 * 1024  # stream bytes buffered before the socket stops being read
MAX_HEADER_BYTES = 64 * 1024  # a response head larger than this is refused
MAX_BODY_BYTES = 64 * 1024 * 1024  # a response body (or a whole stream) larger than this too
USER_AGENT = b"flywheel-gateway"

Headers = list[tuple[bytes, bytes]]


class HttpError(Exception):
    """The exchange failed (connect, timeout, closed, malformed, too large); says why."""


@dataclass
class HttpResponse:
    """A whole answer: status, headers as sent (names lower-cased), body."""

    status: int
    headers: Headers
    body: bytes


class _Origin:
    """Where requests go: host, port, TLS, the ``Host`` header; its connections and waiters."""

    def __init__(self, scheme: str, host: str, port: int, limit: int) -> None:
        self.host, self.port = host, port
        self.ssl: ssl.SSLContext | None = (
            ssl.create_default_context() if scheme == "https" else None
        )
        default = 443 if self.ssl else 80
        name = f"[{host}]" if ":" in host else host  # an IPv6 literal keeps its brackets
        self.host_header = (name if port == default else f"{name}:{port}").encode("idna")
        self.limit = limit
        self.idle: list[_Connection] = []
        self.open = 0
        self.waiters: deque[asyncio.Future[None]] = deque()


class _Connection(asyncio.Protocol):
    """One connection, one exchange at a time, a fresh parser for each."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self.idle_since = 0.0
        self.active = False  # an exchange is under way (bytes outside one poison the connection)
        self.released = False
        self.max_body = MAX_BODY_BYTES
        self._reset(streaming=False)

    def _reset(self, *, streaming: bool) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.streaming = streaming
        self.status = 0
        self.headers: Headers = []
        self.header_bytes = 0
        self.head_received = 0  # bytes read before the head was complete
        self.informational = False  # the message being parsed is a 1xx, skipped
        self.headers_done = False
        self.delimited = False  # the body's end is known (a length or chunks), not the EOF
        self.complete = False
        self.keep_alive = False
        self.received = False  # any byte of this exchange's response
        self.timed_out = False
        self.error: HttpError | None = None
        self.body: list[bytes] = []
        self.buffered = 0
        self.body_bytes = 0
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None
        if self.closed:  # closed before this exchange began: it fails at once, not at the deadline
            self.error = HttpError("the upstream closed the connection")

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self.active or self.complete:
            self.abort()  # an answer nobody asked for: the connection cannot be trusted
            return
        self.received = True
        self.head_received += 0 if self.headers_done else len(data)
        try:
            self.parser.feed_data(data)
            if not self.headers_done and self.head_received > MAX_HEADER_BYTES:
                self._count_head(MAX_HEADER_BYTES)  # a head that never ends
        except httptools.HttpParserUpgrade:
            self._fail(HttpError("the upstream switched protocols"))
            self.abort()
        except httptools.HttpParserError:
            if not self.complete:
                self._fail(self.error or HttpError("malformed HTTP response"))
            self.abort()

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.headers_done and not self.delimited and self.error is None:
            self.complete = True  # a body without length or chunks ends with the connection
            self._wake()
        elif not self.complete:
            self._fail(HttpError("the upstream closed the connection"))

    # -- httptools callbacks ------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:  # a second answer to one request: the connection cannot be trusted
            self.keep_alive = False
            raise HttpError("an answer nobody asked for")
        self.headers, self.header_bytes, self.delimited = [], 0, False

    def on_status(self, status: bytes) -> None:
        self._count_head(len(status))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value))
        lower = name.lower()
        if lower in (b"content-length", b"transfer-encoding"):
            self.delimited = True
        self.headers.append((lower, value))

    def _count_head(self, size: int) -> None:
        self.header_bytes += size
        if self.header_bytes > MAX_HEADER_BYTES:
            self.error = HttpError(f"the upstream's response head is over {MAX_HEADER_BYTES} bytes")
            raise HttpError("head too large")  # stops the parser: feed_data raises

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.informational = True  # 100 Continue, 103 Early Hints: the answer follows
            return
        self.status = status
        self.headers_done = True
        if self.streaming:
            self._wake()

    def on_body(self, body: bytes) -> None:
        self.body_bytes += len(body)
        if self.body_bytes > self.max_body:
            self.error = HttpError(f"the upstream's response body is over {self.max_body} bytes")
            raise HttpError("body too large")
        self.body.append(body)
        if self.streaming:
            self.buffered += len(body)
            if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
                self.paused = True
                self.transport.pause_reading()
            self._wake()

    def on_message_complete(self) -> None:
        if self.informational:
            self.informational = False
            return
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()
        self._wake()

    # -- the exchange -------------------------------------------------------------------------

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _fail(self, error: HttpError) -> None:
        if self.error is None:
            self.error = error
        self._wake()

    async def wait(self) -> None:
        """Until something happened (headers, body, the end); raises the exchange's error."""
        if self.error is None:
            self.waiter = self.loop.create_future()
            await self.waiter
            self.waiter = None
        if self.error is not None:
            raise self.error

    def take(self) -> bytes:
        """The body bytes received since the last call (a stream resumes reading)."""
        data = b"".join(self.body) if len(self.body) != 1 else self.body[0]
        self.body = []
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data

    def expire(self) -> None:
        self.timed_out = True
        self._fail(HttpError("timed out"))
        self.abort()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Stream:
    """A response whose body is read as it arrives: ``status`` and ``headers``, then
    ``async for`` the chunks; :meth:`close` hands the connection back (or drops it when the
    body was not read to its end). When the call's deadline passes the connection is dropped
    and its place in the pool freed at once, whatever the reader is doing."""

    def __init__(self, client: HttpClient, origin: _Origin, conn: _Connection, timer: Any) -> None:
        self.client, self.origin, self.conn = client, origin, conn
        self.status, self.headers = conn.status, conn.headers
        timer.cancel()
        self.timer: asyncio.TimerHandle | None = conn.loop.call_at(timer.when(), self._expire)

    def _expire(self) -> None:
        self.timer = None
        self.conn.expire()
        self.client._release(self.origin, self.conn)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self.conn
        while True:
            if conn.body:
                yield conn.take()
                continue
            if conn.complete:
                return
            await conn.wait()

    async def finish(self, grace_s: float = 1.0) -> None:
        """Read what is left of the body (an SSE stream's chunked terminator follows its last
        event), for at most ``grace_s``, so that the connection can be kept; anything still
        unread then is dropped with the connection by :meth:`close`."""
        conn = self.conn
        if conn.complete:
            return
        guard = conn.loop.call_later(grace_s, conn.expire)
        try:
            while not conn.complete:
                conn.take()
                await conn.wait()
        except HttpError:
            pass
        finally:
            guard.cancel()

    def close(self) -> None:
        """Hand the connection back (kept when the body was read to its end)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.client._release(self.origin, self.conn)


class HttpClient:
    """Connection pools by origin; one per process and event loop (made inside it)."""

    def __init__(
        self, *, limit: int = 512, timeout_s: float = 120.0, max_body_bytes: int = MAX_BODY_BYTES
    ) -> None:
        self.limit = limit
        self.timeout_s = timeout_s
        self.max_body_bytes = max_body_bytes
        self._origins: dict[tuple[str, str, int], _Origin] = {}
        self._targets: dict[str, tuple[_Origin, bytes]] = {}
        self._closed = False

    async def request(
        self,
        method: str,
        url: str,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
        headers: bytes = b"",
    ) -> HttpResponse:
        """One whole exchange. ``body`` is sent as JSON when not empty; ``headers`` are extra
        request header lines (``b"Name: value\\r\\n"`` each)."""
        origin, conn, timer = await self._exchange(method, url, body, False, timeout_s, headers)
        try:
            return HttpResponse(conn.status, conn.headers, conn.take())
        finally:
            timer.cancel()
            self._release(origin, conn)

    async def fetch(
        self,
        method: str,
        url: str,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
        headers: bytes = b"",
    ) -> tuple[int, bytes]:
        """``(status, body)`` of one request (see :meth:`request`)."""
        response = await self.request(method, url, body, timeout_s=timeout_s, headers=headers)
        return response.status, response.body

    async def stream(
        self,
        method: str,
        url: str,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
        headers: bytes = b"",
    ) -> Stream:
        """The response once its headers arrived; the caller must :meth:`Stream.close` it."""
        return Stream(self, *await self._exchange(method, url, body, True, timeout_s, headers))

    async def close(self) -> None:
        """Drop the idle connections; later calls fail."""
        self._closed = True
        for origin in self._origins.values():
            for conn in origin.idle:
                conn.abort()
            origin.idle.clear()

    # -- internals ----------------------------------------------------------------------------

    async def _exchange(
        self,
        method: str,
        url: str,
        body: bytes,
        streaming: bool,
        timeout_s: float | None,
        headers: bytes,
    ) -> tuple[_Origin, _Connection, asyncio.TimerHandle]:
        """The request sent and answered: whole, or (``streaming``) up to its headers, within
        one deadline from now. Only a ``GET`` whose kept-alive connection closed before any
        byte of answer is sent again (once); on any failure the connection is dropped."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_s or self.timeout_s)
        origin, head = self._target(url)
        request = b"".join(
            (method.encode(), head, headers, b"Content-Length: %d\r\n\r\n" % len(body), body)
        )
        for attempt in range(2):
            conn, reused = await self._acquire(origin, deadline, fresh=attempt > 0)
            conn._reset(streaming=streaming)
            conn.active, conn.released, conn.max_body = True, False, self.max_body_bytes
            timer = loop.call_at(deadline, conn.expire)
            assert conn.transport is not None
            conn.transport.write(request)
            try:
                while not (conn.headers_done if streaming else conn.complete):
                    await conn.wait()
                return origin, conn, timer
            except BaseException as exc:
                timer.cancel()
                self._release(origin, conn)  # not complete: closed
                stale = reused and not conn.received and not conn.timed_out
                if not (isinstance(exc, HttpError) and stale and method == "GET" and not attempt):
                    raise
        raise AssertionError("unreachable")

    def _target(self, url: str) -> tuple[_Origin, bytes]:
        """The origin and the request head after the method (`` /path HTTP/1.1\\r\\n...``)."""
        cached = self._targets.get(url)
        if cached is not None:
            return cached
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HttpError(f"not an http(s) URL (scheme {parts.scheme!r})")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        key = (parts.scheme, parts.hostname, port)
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = _Origin(parts.scheme, parts.hostname, port, self.limit)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        head = b"".join(
            (b" ", path.encode(), b" HTTP/1.1\r\nHost: ", origin.host_header, b"\r\nUser-Agent: ")
            + (USER_AGENT, b"\r\nAccept: */*\r\nContent-Type: application/json\r\n")
        )
        if len(self._targets) < 1024:
            self._targets[url] = (origin, head)
        return origin, head

    async def _acquire(
        self, origin: _Origin, deadline: float, *, fresh: bool
    ) -> tuple[_Connection, bool]:
        loop = asyncio.get_running_loop()
        while True:
            if self._closed:
                raise HttpError("the client is closed")
            while origin.idle and not fresh:
                conn = origin.idle.pop()
                if not conn.closed and loop.time() - conn.idle_since < IDLE_S:
                    return conn, True
                conn.abort()
                self._forget(origin)
            if fresh and origin.idle and origin.open >= origin.limit:
                origin.idle.pop(0).abort()  # the oldest idle one makes room for the new one
                self._forget(origin)
            if origin.open < origin.limit:
                origin.open += 1
                try:
                    return await self._connect(origin, deadline), False
                except BaseException:
                    self._forget(origin)
                    raise
            await self._wait_turn(origin, deadline - loop.time())

    async def _wait_turn(self, origin: _Origin, remaining: float) -> None:
        waiter = asyncio.get_running_loop().create_future()
        origin.waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, max(remaining, 0.0))
        except TimeoutError:
            raise HttpError("timed out waiting for a free connection") from None
        except BaseException:
            if not waiter.cancelled() and waiter.done():
                self._wake_one(origin)  # pass the turn on
            raise

    async def _connect(self, origin: _Origin, deadline: float) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    _Connection,
                    origin.host,
                    origin.port,
                    ssl=origin.ssl,
                    server_hostname=origin.host if origin.ssl else None,
                ),
                max(min(CONNECT_TIMEOUT_S, deadline - loop.time()), 0.0),
            )
        except TimeoutError:
            raise HttpError("connecting timed out") from None
        except OSError as exc:
            # strerror may quote the address (uvloop's does): only the errno's text is kept
            why = os.strerror(exc.errno) if exc.errno else type(exc).__name__
            raise HttpError(f"cannot connect: {why}") from None
        return conn

    def _release(self, origin: _Origin, conn: _Connection) -> None:
        """Back to the pool when the exchange ended cleanly, else closed (once per exchange)."""
        if conn.released:
            return
        conn.released, conn.active = True, False
        if conn.complete and conn.keep_alive and not conn.closed and not self._closed:
            conn.idle_since = asyncio.get_running_loop().time()
            origin.idle.append(conn)
            self._wake_one(origin)
        else:
            conn.abort()
            self._forget(origin)

    def _forget(self, origin: _Origin) -> None:
        origin.open -= 1
        self._wake_one(origin)

    @staticmethod
    def _wake_one(origin: _Origin) -> None:
        while origin.waiters:
            waiter = origin.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
