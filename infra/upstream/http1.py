"""The gateway's HTTP/1.1 client for its upstream calls: keep-alive connections per origin,
answers parsed by httptools (the C parser uvicorn uses). A user request makes one upstream call,
a diverse one three, and aiohttp's client spent ~0.3 ms of Python per call here (URL objects,
header multidicts, cookie jar, timers, hooks): more than the rest of the gateway together.

Does: http and https (TLS verified); bodies by ``Content-Length``, chunks or connection close;
at most ``limit`` connections per origin (callers beyond wait); idle ones dropped after
``IDLE_S`` (uvicorn, vLLM's server, closes them at 5 s) or when the server closes them; a request
on a kept-alive connection closed before a byte of answer is sent once more on a new one (it
was never read); one deadline per call, a stream included. Does not: proxies, redirects,
cookies, compression. Failures are :class:`HttpError`, whose message has no request content.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httptools

IDLE_S = 4.0  # an idle connection older than this is not reused (uvicorn closes them at 5 s)
CONNECT_TIMEOUT_S = 5.0
HIGH_WATER = 256 * 1024  # stream bytes buffered before the socket stops being read
USER_AGENT = b"flywheel-gateway"


class HttpError(Exception):
    """The exchange failed (connect, timeout, closed, malformed); the message names why."""


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
    """One connection, one exchange at a time."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self.idle_since = 0.0
        self._reset(streaming=False)

    def _reset(self, *, streaming: bool) -> None:
        self.streaming = streaming
        self.status = 0
        self.headers_done = False
        self.delimited = False  # the body's end is known (a length or chunks), not the EOF
        self.complete = False
        self.keep_alive = False
        self.received = False  # any byte of this exchange's response
        self.error: HttpError | None = None
        self.body: list[bytes] = []
        self.buffered = 0
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None
        if self.closed:  # closed before this exchange began: it fails at once, not at the deadline
            self.error = HttpError("the upstream closed the connection")

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail(HttpError("malformed HTTP response"))
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

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self.delimited = True

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.headers_done = True
        if self.streaming:
            self._wake()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        if self.streaming:
            self.buffered += len(body)
            if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
                self.paused = True
                self.transport.pause_reading()
            self._wake()

    def on_message_complete(self) -> None:
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
        self._fail(HttpError("timed out"))
        self.abort()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Stream:
    """A response whose body is read as it arrives: ``status``, then ``async for`` the
    chunks; :meth:`close` hands the connection back (or drops it when the body was not read
    to its end)."""

    def __init__(self, client: HttpClient, origin: _Origin, conn: _Connection, timer: Any) -> None:
        self.client, self.origin, self.conn, self.timer = client, origin, conn, timer
        self.status = conn.status

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
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
            self.client._release(self.origin, self.conn)


class HttpClient:
    """Connection pools by origin; one per gateway process (made inside its event loop)."""

    def __init__(self, *, limit: int = 512, timeout_s: float = 120.0) -> None:
        self.limit = limit
        self.timeout_s = timeout_s
        self._origins: dict[tuple[str, str, int], _Origin] = {}
        self._targets: dict[str, tuple[_Origin, bytes]] = {}
        self._closed = False

    async def fetch(
        self, method: str, url: str, body: bytes = b"", *, timeout_s: float | None = None
    ) -> tuple[int, bytes]:
        """``(status, body)`` of one request (``body`` sent as JSON when not empty)."""
        origin, conn, timer = await self._exchange(method, url, body, False, timeout_s)
        try:
            return conn.status, conn.take()
        finally:
            timer.cancel()
            self._release(origin, conn)

    async def stream(
        self, method: str, url: str, body: bytes = b"", *, timeout_s: float | None = None
    ) -> Stream:
        """The response once its headers arrived; the caller must :meth:`Stream.close` it."""
        return Stream(self, *await self._exchange(method, url, body, True, timeout_s))

    async def close(self) -> None:
        self._closed = True
        for origin in self._origins.values():
            for conn in origin.idle:
                conn.abort()
            origin.idle.clear()

    # -- internals ----------------------------------------------------------------------------

    async def _exchange(
        self, method: str, url: str, body: bytes, streaming: bool, timeout_s: float | None
    ) -> tuple[_Origin, _Connection, asyncio.TimerHandle]:
        """The request sent and answered: whole, or (``streaming``) up to its headers. A
        kept-alive connection that the server closed unseen fails before any byte of an answer
        (``received`` still False): the request is then sent once more, on a new connection (it
        was never read). On any failure the connection is dropped."""
        for attempt in range(2):
            origin, head = self._target(url)
            conn, reused = await self._acquire(origin, fresh=attempt > 0)
            conn._reset(streaming=streaming)
            timer = asyncio.get_running_loop().call_later(timeout_s or self.timeout_s, conn.expire)
            assert conn.transport is not None
            conn.transport.write(
                b"".join((method.encode(), head, b"Content-Length: %d\r\n\r\n" % len(body), body))
            )
            try:
                while not (conn.headers_done if streaming else conn.complete):
                    await conn.wait()
                return origin, conn, timer
            except BaseException as exc:
                timer.cancel()
                self._release(origin, conn)  # not complete: closed
                if not isinstance(exc, HttpError) or not reused or conn.received or attempt:
                    raise
        raise AssertionError("unreachable")

    def _target(self, url: str) -> tuple[_Origin, bytes]:
        """The origin and the request head after the method (`` /path HTTP/1.1\\r\\n...``)."""
        cached = self._targets.get(url)
        if cached is not None:
            return cached
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HttpError(f"not an http(s) URL: {parts.scheme}://{parts.hostname or ''}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        key = (parts.scheme, parts.hostname, port)
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = _Origin(parts.scheme, parts.hostname, port, self.limit)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        head = b"".join(
            (
                b" ",
                path.encode(),
                b" HTTP/1.1\r\nHost: ",
                origin.host_header,
                b"\r\nUser-Agent: ",
                USER_AGENT,
                b"\r\nAccept: */*\r\nContent-Type: application/json\r\n",
            )
        )
        if len(self._targets) < 1024:
            self._targets[url] = (origin, head)
        return origin, head

    async def _acquire(self, origin: _Origin, *, fresh: bool) -> tuple[_Connection, bool]:
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
                    return await self._connect(origin), False
                except BaseException:
                    self._forget(origin)
                    raise
            waiter = loop.create_future()
            origin.waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if not waiter.cancelled() and waiter.done():
                    self._wake_one(origin)  # pass the turn on
                raise

    async def _connect(self, origin: _Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        where = f"{origin.host}:{origin.port}"
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    _Connection,
                    origin.host,
                    origin.port,
                    ssl=origin.ssl,
                    server_hostname=origin.host if origin.ssl else None,
                ),
                CONNECT_TIMEOUT_S,
            )
        except TimeoutError:
            raise HttpError(f"connecting to {where} timed out") from None
        except OSError as exc:
            raise HttpError(
                f"cannot connect to {where}: {exc.strerror or type(exc).__name__}"
            ) from None
        return conn

    def _release(self, origin: _Origin, conn: _Connection) -> None:
        """Back to the pool when the exchange ended cleanly, else closed."""
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
