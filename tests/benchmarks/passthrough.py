"""The floor for a Python proxy: a bare pass-through on the gateway's own server stack.

Plain ASGI on uvicorn (same loop and HTTP parser as the gateway) that forwards every
``POST /v1/chat/completions`` body unchanged to one upstream and relays status and body
(streams chunk by chunk). No routing, no metrics, no traces: what is left is the cost of one
server hop plus one client hop, which the benchmark divides the gateway's CPU per request by.
``--client flywheel`` (default) makes the client hop with the gateway's own HTTP client
(:mod:`infra.upstream.http1`): the floor; ``--client aiohttp`` with aiohttp, the client most
Python proxies use (the gateway used it until it got its own).

    python -m tests.benchmarks.passthrough --port 9002 --upstream http://127.0.0.1:9001
"""

from __future__ import annotations

import argparse
from typing import Any


async def _lifespan(receive: Any, send: Any, close: Any) -> None:
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await close()
    await send({"type": "lifespan.shutdown.complete"})


async def _request_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send_whole(send: Any, status: int, ctype: bytes, body: bytes) -> None:
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _send_stream(send: Any, status: int, ctype: bytes, pieces: Any) -> None:
    """Relay a stream piece by piece, as it arrives."""
    headers = [(b"content-type", ctype)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    async for piece in pieces:
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def make_app(upstream: str, client: str = "flywheel") -> Any:
    if client == "flywheel":
        return _own_client_app(upstream)
    import aiohttp

    session: aiohttp.ClientSession | None = None

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal session
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, session.close if session else _nothing)
            return
        if session is None:
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=512, keepalive_timeout=30)
            )
        body = await _request_body(receive)
        async with session.request(scope["method"], upstream + scope["path"], data=body) as r:
            ctype = r.headers.get("content-type", "application/json").encode()
            if ctype.startswith(b"text/event-stream"):
                await _send_stream(send, r.status, ctype, r.content.iter_any())
                return
            data = await r.read()
        await _send_whole(send, r.status, ctype, data)

    return app


def _own_client_app(upstream: str) -> Any:
    from infra.upstream.http1 import HttpClient

    http: HttpClient | None = None

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal http
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, http.close if http else _nothing)
            return
        if http is None:
            http = HttpClient(limit=512)
        body, url = await _request_body(receive), upstream + scope["path"]
        if b'"stream": true' not in body and b'"stream":true' not in body:
            status, data = await http.fetch(scope["method"], url, body)
            await _send_whole(send, status, b"application/json", data)
            return
        response = await http.stream(scope["method"], url, body)
        try:
            await _send_stream(send, response.status, b"text/event-stream", aiter(response))
        finally:
            response.close()

    return app


async def _nothing() -> None:
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description="bare pass-through proxy (benchmark floor)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:9001")
    parser.add_argument("--client", choices=("flywheel", "aiohttp"), default="flywheel")
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(
        make_app(args.upstream.rstrip("/"), args.client),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http="httptools",
    )


if __name__ == "__main__":
    main()
