"""One HTTP/1.1 connection of the upstream client (:mod:`infra.upstream.http1`): an asyncio
protocol that parses the answer of one exchange at a time with a parser of its own (httptools),
skips 1xx answers, refuses a head or body over its limits, and drops the connection on any byte
that no exchange asked for."""

from __future__ import annotations

import asyncio
from typing import Any

import httptools

HIGH_WATER = 256 * 1024  # stream bytes buffered before the socket stops being read
MAX_HEADER_BYTES = 64 * 1024  # a response head larger than this is refused
MAX_BODY_BYTES = 64 * 1024 * 1024  # a response body (or a whole stream) larger than this too

Headers = list[tuple[bytes, bytes]]


class HttpError(Exception):
    """The exchange failed (connect, timeout, closed, malformed, too large); says why."""


class Connection(asyncio.Protocol):
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
        """Keep the transport of the new connection."""
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        """Feed the exchange's parser; bytes outside an exchange, a malformed answer or a protocol
        switch fail it and drop the connection."""
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
        """The upstream finished sending: the connection closes."""
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002 - asyncio's
        """End a body delimited by the connection's close, else fail the exchange under way."""
        self.closed = True
        if self.headers_done and not self.delimited and self.error is None:
            self.complete = True  # a body without length or chunks ends with the connection
            self._wake()
        elif not self.complete:
            self._fail(HttpError("the upstream closed the connection"))

    # -- httptools callbacks ------------------------------------------------------------------

    def on_message_begin(self) -> None:
        """Start a response; a second answer to one request is refused."""
        if self.complete:  # a second answer to one request: the connection cannot be trusted
            self.keep_alive = False
            raise HttpError("an answer nobody asked for")
        self.headers, self.header_bytes, self.delimited = [], 0, False

    def on_status(self, status: bytes) -> None:
        """Count the status line towards the head size."""
        self._count_head(len(status))

    def on_header(self, name: bytes, value: bytes) -> None:
        """Keep the header (lower-cased name) and count it towards the head size."""
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
        """Skip a 1xx head; otherwise the status and headers are in (a stream's waiter wakes)."""
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.informational = True  # 100 Continue, 103 Early Hints: the answer follows
            return
        self.status = status
        self.headers_done = True
        if self.streaming:
            self._wake()

    def on_body(self, body: bytes) -> None:
        """Keep a body chunk (refused over ``max_body``); a stream pauses reading past
        ``HIGH_WATER``."""
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
        """The answer is complete (a 1xx is skipped); note whether the connection can be reused."""
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
        """Fail the exchange as timed out and drop the connection."""
        self.timed_out = True
        self._fail(HttpError("timed out"))
        self.abort()

    def abort(self) -> None:
        """Drop the connection at once (it is never reused)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
