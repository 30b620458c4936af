"""A model server that keeps vLLM's LoRA bookkeeping and nothing else: ``GET /v1/models``
lists the base model and the adapters loaded, ``POST /v1/load_lora_adapter`` and
``/v1/unload_lora_adapter`` change the list (as vLLM does with runtime LoRA updating, it never
refuses one more: its ``--max-loras`` is a batch size, not a limit), ``GET /health`` answers
200. With ``api_key`` it guards ``/v1/*`` as vLLM's ``--api-key`` does (401 without
``Authorization: Bearer <key>``; ``/health`` stays open). Served on loopback in a thread by
:func:`start_lora_server`."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoraServer(ThreadingHTTPServer):
    """The server; ``adapters`` maps each loaded adapter to its path, ``loads`` counts the
    load requests it received."""

    def __init__(self, base: str, adapters: dict[str, str], api_key: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.base = base
        self.adapters = dict(adapters)
        self.loads = 0
        self.api_key = api_key
        self.refused = 0  # requests turned away for a missing or wrong key

    @property
    def url(self) -> str:
        """Its root URL."""
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: LoraServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Quiet: the tests read what the server holds, not its log."""

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _unauthorised(self) -> bool:
        key = self.server.api_key
        if key is None or not self.path.startswith("/v1"):
            return False
        if self.headers.get("authorization") == f"Bearer {key}":
            return False
        self.server.refused += 1
        self._answer(401, {"error": "Unauthorized"})
        return True

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        """``/v1/models`` and ``/health``."""
        if self.path == "/health":
            self._answer(200, {})
            return
        if self._unauthorised():
            return
        names = [self.server.base, *self.server.adapters]
        self._answer(200, {"object": "list", "data": [{"id": n} for n in names]})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        """Load or unload an adapter by name."""
        if self._unauthorised():
            return
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        name = str(body.get("lora_name"))
        if self.path == "/v1/load_lora_adapter":
            self.server.loads += 1
            self.server.adapters[name] = str(body.get("lora_path"))
        elif self.server.adapters.pop(name, None) is None:
            self._answer(404, {"error": f"{name} is not loaded"})
            return
        self._answer(200, {})


@contextmanager
def start_lora_server(
    base: str = "v0", adapters: dict[str, str] | None = None, *, api_key: str | None = None
) -> Iterator[LoraServer]:
    """A :class:`LoraServer` serving in a thread for the block."""
    server = LoraServer(base, adapters or {}, api_key)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
