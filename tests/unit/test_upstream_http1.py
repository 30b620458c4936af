"""The gateway's own HTTP/1.1 client against real loopback servers that misbehave the ways
model servers do: idle keep-alive connections closed, answers that never come, garbage,
streams cut short, more callers than connections."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from infra.upstream.http1 import HttpClient, HttpError

Handler = Callable[[bytes, bytes, asyncio.StreamWriter], Awaitable[bool]]


class Server:
    """A loopback HTTP/1.1 server: ``handler(head, body, writer)`` answers one request and
    returns whether to keep the connection open."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[bytes] = []
        self.connections = 0
        self.open_now = 0
        self.most_open = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for writer in self.writers:
            writer.close()
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.requests.append(body)
                if not await self.handler(head, body, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open_now -= 1
            writer.close()


def answer(body: bytes, status: int = 200) -> bytes:
    return b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        status,
        len(body),
        body,
    )


async def echo(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
    writer.write(answer(b'{"echo": ' + (body or b"null") + b"}"))
    return True


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_requests_share_one_kept_alive_connection() -> None:
    async def main() -> None:
        async with Server(echo) as server:
            client = HttpClient()
            for n in range(3):
                status, body = await client.fetch("POST", server.url + "/v1/x", b"%d" % n)
                assert status == 200 and body == b'{"echo": %d}' % n
            assert server.connections == 1 and server.requests == [b"0", b"1", b"2"]
            await client.close()

    run(main())


def test_an_error_status_is_returned_with_its_body() -> None:
    async def busy(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(b'{"error": "busy"}', status=503))
        return True

    async def main() -> None:
        async with Server(busy) as server:
            client = HttpClient()
            assert await client.fetch("POST", server.url + "/v1/x", b"{}") == (
                503,
                b'{"error": "busy"}',
            )
            await client.close()

    run(main())


def test_a_stream_yields_chunks_as_they_arrive() -> None:
    release = asyncio.Event()

    async def sse(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
        writer.write(b"Transfer-Encoding: chunked\r\n\r\n")
        for event in (b"data: 1\n\n", b"data: 2\n\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            await release.wait()  # the second only once the client has read the first
        writer.write(b"0\r\n\r\n")
        return True

    async def main() -> None:
        async with Server(sse) as server:
            client = HttpClient()
            response = await client.stream("POST", server.url + "/v1/x", b"{}")
            got = []
            async for chunk in response:
                got.append(chunk)
                release.set()
            response.close()
            assert response.status == 200 and b"".join(got) == b"data: 1\n\ndata: 2\n\n"
            assert len(got) == 2  # the first came before the server sent the second
            # the connection went back to the pool, whole
            assert (await client.fetch("GET", server.url + "/v1/models"))[0] == 200
            assert server.connections == 1
            await client.close()

    run(main())


def test_a_stream_read_to_its_last_event_keeps_its_connection() -> None:
    """The caller stops at ``data: [DONE]``; the chunked terminator comes in a later write."""

    async def sse(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        done = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n" % (len(done), done))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"0\r\n\r\n")
        return True

    async def main() -> None:
        async with Server(sse) as server:
            client = HttpClient()
            for _ in range(3):
                response = await client.stream("POST", server.url + "/v1/x", b"{}")
                async for chunk in response:
                    assert chunk.endswith(b"[DONE]\n\n")
                    break
                await response.finish()
                response.close()
            assert server.connections == 1
            await client.close()

    run(main())


def test_an_idle_connection_the_server_closed_is_replaced_not_failed() -> None:
    """uvicorn (vLLM) closes keep-alive connections idle for 5 s: the next request must not
    fail, and the server must see it once."""

    async def once(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(b"{}"))
        await writer.drain()
        return False  # then close, without "Connection: close"

    async def main() -> None:
        async with Server(once) as server:
            client = HttpClient()
            assert (await client.fetch("POST", server.url + "/v1/x", b"1"))[0] == 200
            await asyncio.sleep(0.05)
            assert (await client.fetch("POST", server.url + "/v1/x", b"2"))[0] == 200
            assert server.requests == [b"1", b"2"] and server.connections == 2
            await client.close()

    run(main())


def test_a_post_on_a_kept_alive_connection_closed_under_it_is_never_sent_again() -> None:
    """The server closes the idle connection just as the next request is written on it: it
    may have read it (a chat call may have started generating), so a POST fails and reaches
    the server once; a GET is sent once more, on a new connection."""
    served: dict[int, int] = {}

    async def second_dropped(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        n = served[id(writer)] = served.get(id(writer), 0) + 1
        if n == 2:
            return False  # closed unanswered
        writer.write(answer(body or b"{}"))
        return True

    async def main() -> None:
        async with Server(second_dropped) as server:
            client = HttpClient()
            assert await client.fetch("POST", server.url + "/v1/x", b"1") == (200, b"1")
            with pytest.raises(HttpError, match="closed the connection"):
                await client.fetch("POST", server.url + "/v1/x", b"2")
            assert server.requests == [b"1", b"2"]
            assert (await client.fetch("GET", server.url + "/v1/models"))[0] == 200
            assert (await client.fetch("GET", server.url + "/v1/models"))[0] == 200
            assert server.requests == [b"1", b"2", b"", b"", b""]  # the dropped GET, sent again
            await client.close()

    run(main())


def test_a_body_ended_by_closing_the_connection_is_whole() -> None:
    async def old_style(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"a": 1}')
        await writer.drain()
        return False

    async def main() -> None:
        async with Server(old_style) as server:
            client = HttpClient()
            assert await client.fetch("POST", server.url + "/v1/x", b"{}") == (200, b'{"a": 1}')
            await client.close()

    run(main())


def test_a_body_cut_short_is_an_error_not_an_answer() -> None:
    async def cut(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"a": 1')
        await writer.drain()
        return False

    async def main() -> None:
        async with Server(cut) as server:
            client = HttpClient()
            with pytest.raises(HttpError, match="closed the connection"):
                await client.fetch("POST", server.url + "/v1/x", b"{}")
            await client.close()

    run(main())


def test_a_request_dropped_unanswered_fails_once_and_is_not_repeated() -> None:
    async def drop(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        return False

    async def main() -> None:
        async with Server(drop) as server:
            client = HttpClient()
            with pytest.raises(HttpError, match="closed the connection"):
                await client.fetch("POST", server.url + "/v1/x", b"{}")
            assert server.requests == [b"{}"]
            await client.close()

    run(main())


def test_an_answer_that_never_comes_times_out() -> None:
    async def silent(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(30)
        return False

    async def main() -> None:
        async with Server(silent) as server:
            client = HttpClient()
            started = time.monotonic()
            with pytest.raises(HttpError, match="timed out"):
                await client.fetch("POST", server.url + "/v1/x", b"{}", timeout_s=0.3)
            assert time.monotonic() - started < 10
            await client.close()

    run(main())


def test_garbage_is_a_malformed_response() -> None:
    async def garbage(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        return True

    async def main() -> None:
        async with Server(garbage) as server:
            client = HttpClient()
            with pytest.raises(HttpError, match="malformed"):
                await client.fetch("POST", server.url + "/v1/x", b"{}")
            await client.close()

    run(main())


def test_a_closed_port_is_an_error_that_names_no_host() -> None:
    async def main() -> None:
        async with Server(echo) as server:
            url = server.url
        client = HttpClient()
        with pytest.raises(HttpError, match="cannot connect") as failed:
            await client.fetch("POST", url + "/v1/x", b"{}")
        assert "127.0.0.1" not in str(failed.value)  # 502 bodies name no internal host
        await client.close()

    run(main())


def test_callers_beyond_the_limit_wait_for_a_connection() -> None:
    async def slow(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)
        writer.write(answer(body))
        return True

    async def main() -> None:
        async with Server(slow) as server:
            client = HttpClient(limit=2)
            results = await asyncio.gather(
                *(client.fetch("POST", server.url + "/v1/x", b"%d" % n) for n in range(6))
            )
            assert [body for _, body in results] == [b"%d" % n for n in range(6)]
            assert server.most_open == 2
            await client.close()

    run(main())


def test_a_stream_left_early_drops_its_connection() -> None:
    async def endless(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        if body == b"plain":
            writer.write(answer(b"{}"))
            return True
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        while True:
            writer.write(b"9\r\ndata: x\n\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)

    async def main() -> None:
        async with Server(endless) as server:
            client = HttpClient()
            response = await client.stream("POST", server.url + "/v1/x", b"{}")
            async for _ in response:
                break
            response.close()
            # the half-read answer is not taken for the next one's
            assert await client.fetch("POST", server.url + "/v1/x", b"plain") == (200, b"{}")
            assert server.connections == 2
            await client.close()

    run(main())
