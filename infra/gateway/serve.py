"""Running the gateway: blocking (``flywheel gateway``) or in a background thread (the loop,
the simulator's tests)."""

from __future__ import annotations

import gc
import logging
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from infra.settings import Settings

log = logging.getLogger(__name__)


def serve_gateway(settings: Settings, **app_kwargs: Any) -> None:
    """Serve on ``settings.gateway.host:port`` until interrupted (keyword arguments go to
    :func:`~infra.gateway.app.create_app`)."""
    import uvicorn

    from infra.gateway.app import create_app

    app = create_app(settings, **app_kwargs)
    # a process of its own: start-up objects leave the GC's generations (shorter pauses)
    gc.freeze()
    log.info("gateway on http://%s:%d", settings.gateway.host, settings.gateway.port)
    uvicorn.run(
        app,
        host=settings.gateway.host,
        port=settings.gateway.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=10,
    )


@dataclass
class GatewayHandle:
    """A gateway serving in a background thread; ``url`` has no trailing slash (the OpenAI
    base URL is ``url + "/v1"``)."""

    url: str
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self, timeout_s: float = 10.0) -> None:
        """Shut down (traces still queued are written) and wait for the thread."""
        self.server.should_exit = True
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            log.warning("gateway thread did not stop within %.0f s", timeout_s)

    def __enter__(self) -> GatewayHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_background_gateway(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    startup_timeout_s: float = 30.0,
    **app_kwargs: Any,
) -> GatewayHandle:
    """Start the gateway in a daemon thread and return once it accepts connections.

    ``port=0`` picks a free port (see ``handle.url``); default host/port from settings.
    Keyword arguments go to :func:`~infra.gateway.app.create_app`.

    Raises:
        RuntimeError: the server did not start within ``startup_timeout_s``.
    """
    from infra.gateway.app import create_app

    host = host or settings.gateway.host
    port = settings.gateway.port if port is None else port
    app = create_app(settings, **app_kwargs)
    url, server, thread = serve_in_thread(app, host=host, port=port, timeout_s=startup_timeout_s)
    return GatewayHandle(url=url, app=app, server=server, thread=thread)


def serve_in_thread(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, timeout_s: float = 30.0
) -> tuple[str, uvicorn.Server, threading.Thread]:
    """Serve an ASGI app with uvicorn in a daemon thread: ``(url, server, thread)``; stop it
    with ``server.should_exit = True`` and ``thread.join()``."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP: asyncio only sets TCP_NODELAY on such sockets, and without it
    # Nagle + delayed ACK add ~40 ms to every keep-alive request
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-thread", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"server did not start on {host}:{bound_port}")
        time.sleep(0.02)
    url_host = f"[{host}]" if ":" in host else host
    return f"http://{url_host}:{bound_port}", server, thread
