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

from infra.upstream.connection import (
    MAX_BODY_BYTES,
    MAX_HEADER_BYTES,
    Connection,
    Headers,
    HttpError,
)

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_HEADER_BYTES",
    "HttpClient",
    "HttpError",
    "HttpResponse",
    "Stream",
]

IDLE_S = 4.0  # an idle connection older than this is not reused (uvicorn closes them at 5 s)
CONNECT_TIMEOUT_S = 5.0
USER_AGENT = b"flywheel-gateway"


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
        self.idle: list[Connection] = []
        self.open = 0
        self.waiters: deque[asyncio.Future[None]] = deque()


class Stream:
    """A response whose body is read as it arrives: ``status`` and ``headers``, then
    ``async for`` the chunks; :meth:`close` hands the connection back (or drops it when the
    body was not read to its end). When the call's deadline passes the connection is dropped
    and its place in the pool freed at once, whatever the reader is doing."""

    def __init__(self, client: HttpClient, origin: _Origin, conn: Connection, timer: Any) -> None:
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
    ) -> tuple[_Origin, Connection, asyncio.TimerHandle]:
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
    ) -> tuple[Connection, bool]:
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

    async def _connect(self, origin: _Origin, deadline: float) -> Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    Connection,
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

    def _release(self, origin: _Origin, conn: Connection) -> None:
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
