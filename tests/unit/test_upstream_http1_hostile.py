"""The upstream client against servers that misbehave in ways that used to cross callers or
exhaust the pool: an answer to a timed-out request, 1xx answers, unsolicited bytes, huge heads
and bodies, a stream whose reader is stuck, callers waiting for a connection."""

from __future__ import annotations

import asyncio

import pytest

from infra.upstream.http1 import MAX_HEADER_BYTES, HttpClient, HttpError
from tests.unit.test_upstream_http1 import Server, answer, run


def test_a_timed_out_request_reaches_the_upstream_once() -> None:
    """The first request keeps the connection alive; the second times out on it: it must not
    be sent again (it may be generating already), and the next caller gets its own answer."""

    async def slow_second(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        if body == b"2":
            await asyncio.sleep(1.0)
        writer.write(answer(body))
        return True

    async def main() -> None:
        async with Server(slow_second) as server:
            client = HttpClient()
            assert await client.fetch("POST", server.url + "/v1/x", b"1") == (200, b"1")
            with pytest.raises(HttpError, match="timed out"):
                await client.fetch("POST", server.url + "/v1/x", b"2", timeout_s=0.2)
            assert await client.fetch("POST", server.url + "/v1/x", b"3") == (200, b"3")
            assert server.requests == [b"1", b"2", b"3"]
            await client.close()

    run(main())


def test_a_1xx_answer_is_skipped_and_never_crosses_callers() -> None:
    async def continue_first(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + answer(body))
        return True

    async def main() -> None:
        async with Server(continue_first) as server:
            client = HttpClient()
            assert await client.fetch("POST", server.url + "/v1/x", b"first") == (200, b"first")
            assert await client.fetch("POST", server.url + "/v1/x", b"second") == (200, b"second")
            assert server.connections == 1
            await client.close()

    run(main())


def test_bytes_after_an_answer_never_reach_the_next_caller() -> None:
    async def extra(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(body) + answer(b"stale"))
        return True

    async def main() -> None:
        async with Server(extra) as server:
            client = HttpClient()
            for n in (b"1", b"2", b"3"):
                assert await client.fetch("POST", server.url + "/v1/x", n) == (200, n)
            await client.close()

    run(main())


def test_response_headers_are_available() -> None:
    async def with_headers(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 429 X\r\nRetry-After: 7\r\nContent-Length: 2\r\n\r\n{}")
        return True

    async def main() -> None:
        async with Server(with_headers) as server:
            client = HttpClient()
            response = await client.request("POST", server.url + "/v1/x", b"{}")
            assert response.status == 429 and (b"retry-after", b"7") in response.headers
            stream = await client.stream("POST", server.url + "/v1/x", b"{}")
            assert (b"retry-after", b"7") in stream.headers
            stream.close()
            await client.close()

    run(main())


def test_a_huge_head_or_body_from_the_upstream_is_refused() -> None:
    async def huge(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        if body == b"head":
            writer.write(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (MAX_HEADER_BYTES + 10))
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"b" * 5000)
        return True

    async def main() -> None:
        async with Server(huge) as server:
            client = HttpClient(max_body_bytes=4000)
            with pytest.raises(HttpError, match="head is over"):
                await client.fetch("POST", server.url + "/v1/x", b"head", timeout_s=20)
            with pytest.raises(HttpError, match="body is over 4000"):
                await client.fetch("POST", server.url + "/v1/x", b"body")
            await client.close()

    run(main())


def test_the_deadline_covers_the_wait_for_a_connection() -> None:
    """One connection, held by a call that will not be answered for a long time: a second
    call with a short deadline fails at its own deadline, it does not wait for the first."""

    async def silent_first(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        if body == b"hang":
            await asyncio.sleep(30)
        writer.write(answer(body))
        return True

    async def main() -> None:
        async with Server(silent_first) as server:
            client = HttpClient(limit=1)
            hung = asyncio.ensure_future(
                client.fetch("POST", server.url + "/v1/x", b"hang", timeout_s=30)
            )
            await asyncio.sleep(0.1)
            short = client.fetch("POST", server.url + "/v1/x", b"short", timeout_s=0.3)
            # the guard only turns a hang into a failure; the call must fail by itself first
            with pytest.raises(HttpError, match="waiting for a free connection"):
                await asyncio.wait_for(short, 10)
            hung.cancel()
            await client.close()

    run(main())


def test_a_stream_past_its_deadline_frees_its_connection_while_its_reader_is_stuck() -> None:
    """A stream whose reader never comes back (a client that does not read): at the deadline
    its connection is dropped and the next caller gets it, without anyone closing the stream."""

    async def trickle(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        if body == b"stream":
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
            await writer.drain()
            await asyncio.sleep(30)
        writer.write(answer(body))
        return True

    async def main() -> None:
        async with Server(trickle) as server:
            client = HttpClient(limit=1)
            stuck = await client.stream("POST", server.url + "/v1/x", b"stream", timeout_s=0.3)
            assert stuck.status == 200  # and then nobody reads or closes it
            after = client.fetch("POST", server.url + "/v1/x", b"next", timeout_s=20)
            assert await asyncio.wait_for(after, 10) == (200, b"next")
            stuck.close()  # late: a no-op
            assert await client.fetch("POST", server.url + "/v1/x", b"again") == (200, b"again")
            await client.close()

    run(main())
