"""A minimal loopback HTTP/1.1 load client for tests and benchmarks of the gateway: keep-alive
connections a few times cheaper per request than a full client (so the load generator does
not starve the server it measures), many bodies over a few connections (:func:`post_many`),
and an open-loop load at a fixed rate (:func:`open_loop`)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class OpenCount:
    """A client's open connections: now, and the most at once."""

    now: int = 0
    peak: int = 0


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class LoopbackConnection:
    """A minimal keep-alive HTTP/1.1 client connection for load tests and benchmarks: a few
    times cheaper per request than a full client, so the load generator does not starve the
    server it measures. Only what the gateway sends is understood (Content-Length bodies, and
    chunked ones: streams, read to the end). An answer with ``Connection: close`` ends the
    connection (``closed``), as real HTTP clients take it: reusing it would only meet a reset
    (a refusal at the gateway's connection limit says it)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        count: OpenCount | None = None,
    ) -> None:
        self.reader, self.writer, self.count = reader, writer, count
        self.closed = False
        if count is not None:
            count.now += 1
            count.peak = max(count.peak, count.now)

    @classmethod
    async def open(cls, url: str, count: OpenCount | None = None) -> LoopbackConnection:
        """A connection to ``url``, counted in ``count`` while open."""
        host, _, port = url.removeprefix("http://").partition(":")
        return cls(*await asyncio.open_connection(host, int(port.split("/")[0])), count)

    async def post(self, path: str, body: bytes, headers: dict[str, str] | None = None) -> Reply:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"POST {path} HTTP/1.1\r\nHost: loopback\r\nContent-Type: application/json\r\n"
            f"{extra}Content-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        raw = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        fields = dict(line.split(":", 1) for line in raw[1:] if ":" in line)
        found = {k.strip().lower(): v.strip() for k, v in fields.items()}
        if found.get("transfer-encoding") == "chunked":  # a stream: read it to the end
            data = await self._chunked()
        else:
            data = await self.reader.readexactly(int(found.get("content-length", "0")))
        if found.get("connection", "").lower() == "close":
            self.close()
        return Reply(int(raw[0].split()[1]), found, data)

    async def _chunked(self) -> bytes:
        parts = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            parts.append(await self.reader.readexactly(size + 2))
            if size == 0:
                return b"".join(p[:-2] for p in parts)

    def close(self) -> None:
        if not self.closed and self.count is not None:
            self.count.now -= 1
        self.closed = True
        self.writer.close()


async def post_many(
    url: str,
    path: str,
    bodies: list[dict[str, Any]],
    *,
    concurrency: int = 16,
    headers: dict[str, str] | None = None,
) -> list[Reply]:
    """POST every body (JSON) over ``concurrency`` keep-alive connections, with ``headers``;
    replies in order."""
    conns = [await LoopbackConnection.open(url) for _ in range(min(concurrency, len(bodies)))]
    replies: list[Reply | None] = [None] * len(bodies)
    todo = iter(range(len(bodies)))

    async def worker(conn: LoopbackConnection) -> None:
        for i in todo:
            if conn.closed:  # the server ended it (``Connection: close``): a new one
                conns.append(conn := await LoopbackConnection.open(url))
            replies[i] = await conn.post(path, json.dumps(bodies[i]).encode(), headers)

    try:
        await asyncio.gather(*(worker(c) for c in conns))
    finally:
        for conn in conns:
            conn.close()
    return [r for r in replies if r is not None]


@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)  # seconds, from each scheduled start
    statuses: list[int] = field(default_factory=list)
    failures: int = 0  # connection errors (no HTTP status at all)
    failure_kinds: dict[str, int] = field(default_factory=dict)
    trace_ids: list[str] = field(default_factory=list)  # X-Trace-Id of the replies that had one
    # the client's open connections (their peak: above a server's per-client cap, it refuses)
    connections: OpenCount = field(default_factory=OpenCount)

    @property
    def errors(self) -> int:
        return self.failures + sum(s != 200 for s in self.statuses)


async def _idle_or_new(
    idle: list[tuple[LoopbackConnection, float]], now: float, url: str, count: OpenCount
) -> tuple[LoopbackConnection, bool]:
    """The most recently used idle connection (True: reused), or a new one. Servers close idle
    keep-alive connections (uvicorn after 5 s): ours close first, oldest first, so the open
    count is the server's too."""
    while idle and now - idle[0][1] > 3.0:
        idle.pop(0)[0].close()
    if idle:
        return idle.pop()[0], True
    return await LoopbackConnection.open(url, count), False


async def open_loop(
    url: str,
    path: str,
    body: dict[str, Any],
    *,
    rate: float,
    seconds: float,
    headers: dict[str, str] | None = None,
) -> LoadResult:
    """Send ``rate`` requests per second for ``seconds`` whatever the replies take (open loop:
    latency counts from each request's scheduled time, so queueing is not hidden), each with
    ``headers``."""
    loop = asyncio.get_running_loop()
    payload = json.dumps(body).encode()
    idle: list[tuple[LoopbackConnection, float]] = []  # (connection, last used)
    result = LoadResult()

    async def one(scheduled: float) -> None:
        conn: LoopbackConnection | None = None
        try:
            conn, reused = await _idle_or_new(idle, loop.time(), url, result.connections)
            try:
                reply = await conn.post(path, payload, headers)
            except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError) as exc:
                if not reused or (isinstance(exc, asyncio.IncompleteReadError) and exc.partial):
                    raise
                # closed by the server just as we reused it: retry once, as HTTP clients do
                conn.close()
                conn = await LoopbackConnection.open(url, result.connections)
                reply = await conn.post(path, payload, headers)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            if conn is not None:
                conn.close()
            result.failures += 1
            kind = f"{type(exc).__name__}: {exc}"[:80]
            result.failure_kinds[kind] = result.failure_kinds.get(kind, 0) + 1
            return
        result.latencies.append(loop.time() - scheduled)
        result.statuses.append(reply.status)
        if "x-trace-id" in reply.headers:
            result.trace_ids.append(reply.headers["x-trace-id"])
        if not conn.closed:
            idle.append((conn, loop.time()))

    tasks = []
    start = loop.time() + 0.05
    for i in range(int(rate * seconds)):
        scheduled = start + i / rate
        if (delay := scheduled - loop.time()) > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    for conn, _ in idle:
        conn.close()
    return result
