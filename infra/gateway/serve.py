"""Running the gateway: blocking (``flywheel gateway``) or in a background thread (the loop,
the simulator's tests)."""

from __future__ import annotations

import gc
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.errors import ConfigError
from infra.gateway.asgi import SERVER_STACK, by_port
from infra.gateway.edge import server_options
from infra.gateway.stable import unservable_stable
from infra.gateway.workers import serve_workers

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from infra.settings import Settings

log = logging.getLogger(__name__)


def serve_gateway(
    settings: Settings, *, announce: Callable[[str], None] | None = None, **app_kwargs: Any
) -> None:
    """Serve until interrupted: the public listener on ``settings.gateway.host:port``, the
    admin API on ``admin_host:admin_port`` (when an admin token is set). ``announce`` gets one
    line saying where it listens, once it does (default: the log). Keyword arguments go to
    :func:`~infra.gateway.app.create_app`. With ``FLYWHEEL_GATEWAY__WORKERS`` > 1 the
    listeners are served by that many worker processes (:mod:`infra.gateway.workers`).

    Raises:
        ConfigError: a port is taken or both listeners name the same port, or the admin token
            is a placeholder.
    """
    import uvicorn

    from infra.gateway.app import create_app

    cfg = settings.gateway
    app = create_app(settings, **app_kwargs)
    admin_on = app.state.admin.enabled
    if admin_on and cfg.admin_port == cfg.port and cfg.port != 0:
        raise ConfigError(
            f"FLYWHEEL_GATEWAY__PORT and FLYWHEEL_GATEWAY__ADMIN_PORT are both {cfg.port}: "
            "the admin API needs a port of its own"
        )
    sockets = listen(
        cfg.host, cfg.port, admin=(cfg.admin_host, cfg.admin_port) if admin_on else None
    )
    public_url = _url(cfg.host, sockets[0].getsockname()[1])
    admin_line = (
        f"admin API on {_url(cfg.admin_host, sockets[1].getsockname()[1])}"
        if admin_on
        else "admin API off (set FLYWHEEL_GATEWAY__ADMIN_TOKEN to enable it)"
    )
    line = f"gateway listening on {public_url} (OpenAI base URL {public_url}/v1); {admin_line}"
    gateway = app.state.gateway
    gateway.watcher.refresh()
    if why := unservable_stable(settings, gateway.pool.store, gateway.watcher.state.stable):
        line += f"\nwarning: {why} (chat requests get 502 until then)"
    app.state.parts.keys.refresh()  # open or keyed mode, named in the startup line
    line += f"\n{app.state.parts.keys.mode_line()}"
    if cfg.workers > 1:
        if app_kwargs:
            raise ConfigError("FLYWHEEL_GATEWAY__WORKERS > 1 serves the configured gateway only")
        serve_workers(settings, sockets, announce=announce or log.info, line=line)
        return
    config = uvicorn.Config(
        by_port(app, sockets),
        **server_options(cfg, admin_port=_port(sockets, 1), app=app),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
    server = _server(config, on_started=lambda: (announce or log.info)(line))
    # a process of its own: start-up objects leave the GC's generations (shorter pauses)
    gc.freeze()
    server.run(sockets=sockets)


@dataclass
class GatewayHandle:
    """A gateway serving in a background thread; ``url`` has no trailing slash (the OpenAI
    base URL is ``url + "/v1"``)."""

    url: str
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread
    admin_url: str | None = None  # the admin listener (None: no admin token, API off)

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
    admin_port: int | None = None,
    startup_timeout_s: float = 30.0,
    **app_kwargs: Any,
) -> GatewayHandle:
    """Start the gateway in a daemon thread and return once it accepts connections.

    ``port=0`` picks a free port (see ``handle.url``), and then the admin listener gets a
    free port too (``handle.admin_url``); default host/ports from settings. Keyword arguments
    go to :func:`~infra.gateway.app.create_app`.

    Raises:
        RuntimeError: the server did not start within ``startup_timeout_s``.
        ConfigError: a port is taken, or the admin token is a placeholder.
    """
    from infra.gateway.app import create_app

    cfg = settings.gateway
    host = host or cfg.host
    port = cfg.port if port is None else port
    if admin_port is None:
        admin_port = 0 if port == 0 else cfg.admin_port
    app = create_app(settings, **app_kwargs)
    admin = (cfg.admin_host, admin_port) if app.state.admin.enabled else None
    sockets = listen(host, port, admin=admin)
    server, thread = serve_sockets_in_thread(
        by_port(app, sockets),
        sockets,
        timeout_s=startup_timeout_s,
        options=server_options(cfg, admin_port=_port(sockets, 1), app=app),
    )
    urls = [_url(s.getsockname()[0], s.getsockname()[1]) for s in sockets]
    log.info("gateway on %s: %s", urls[0], app.state.parts.keys.mode_line())
    return GatewayHandle(
        url=urls[0],
        app=app,
        server=server,
        thread=thread,
        admin_url=urls[1] if len(urls) > 1 else None,
    )


def listen(host: str, port: int, *, admin: tuple[str, int] | None) -> list[socket.socket]:
    """The public socket, and the admin one when ``admin`` is ``(host, port)``.

    Raises:
        ConfigError: an address cannot be bound.
    """
    public = bind(host, port, setting="FLYWHEEL_GATEWAY__HOST/PORT")
    if admin is None:
        return [public]
    try:
        return [public, bind(*admin, setting="FLYWHEEL_GATEWAY__ADMIN_HOST/ADMIN_PORT")]
    except ConfigError:
        public.close()
        raise


def bind(host: str, port: int, *, setting: str) -> socket.socket:
    """A TCP socket bound to ``host:port`` (0: a free port).

    Raises:
        ConfigError: the address cannot be bound (taken, or not an address of this host).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP: asyncio only sets TCP_NODELAY on such sockets, and without it
    # Nagle + delayed ACK add ~40 ms to every keep-alive request
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({setting}): {exc.strerror}") from exc
    return sock


def _port(sockets: list[socket.socket], index: int) -> int | None:
    """The port of ``sockets[index]`` (None: no such socket)."""
    return sockets[index].getsockname()[1] if len(sockets) > index else None


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _server(config: uvicorn.Config, *, on_started: Callable[[], None] | None = None) -> Any:
    """A uvicorn server that calls ``on_started`` once its sockets accept connections."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and on_started is not None:
                on_started()

    return Server(config)


def serve_in_thread(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, timeout_s: float = 30.0
) -> tuple[str, uvicorn.Server, threading.Thread]:
    """Serve an ASGI app with uvicorn in a daemon thread: ``(url, server, thread)``; stop it
    with ``server.should_exit = True`` and ``thread.join()``."""
    sock = bind(host, port, setting="port")
    server, thread = serve_sockets_in_thread(app, [sock], timeout_s=timeout_s)
    return _url(host, sock.getsockname()[1]), server, thread


def serve_sockets_in_thread(
    app: Any,
    sockets: list[socket.socket],
    *,
    timeout_s: float = 30.0,
    options: dict[str, Any] | None = None,
) -> tuple[uvicorn.Server, threading.Thread]:
    """Serve ``app`` on bound ``sockets`` in a daemon thread; returns once they accept.
    ``options``: uvicorn's loop and protocol (default: uvloop and plain httptools).

    Raises:
        RuntimeError: the server did not start within ``timeout_s``.
    """
    import uvicorn

    # log_config=None: uvicorn's own dictConfig would shut down the handlers already installed;
    # inside a Prefect flow that flushes Prefect's API log handler while its worker waits for
    # the logging lock dictConfig holds, a deadlock (seen starting the gateway in flywheel run)
    config = uvicorn.Config(
        app,
        **(options or SERVER_STACK),
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": sockets}, name="uvicorn-thread", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            for sock in sockets:
                sock.close()
            where = ", ".join(_url(*s.getsockname()[:2]) for s in sockets)
            raise RuntimeError(f"server did not start on {where}")
        time.sleep(0.02)
    return server, thread
