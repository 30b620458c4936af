"""Several gateway worker processes behind one port (``FLYWHEEL_GATEWAY__WORKERS``).

The parent binds the listeners, then starts the workers as fresh interpreters (``spawn``),
each serving the same sockets with its own app (the kernel spreads connections over them).
Metrics are aggregated with prometheus-client's multiprocess mode: the parent points
``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory before any worker imports the client, every
worker writes its samples there, and ``/metrics`` on any worker answers the sum over all of
them (:meth:`infra.gateway.metrics.GatewayMetrics.render`). Each worker has its own trace
queue and spool writer (objects are named by process, so they never collide), its own
routing-state poller and upstream connection pool.

Per-process by nature: the feedback endpoint's one-vote-per-trace memory and the model that
served a trace (``user_feedback_total{model}``) are known to the worker that served it, so with
several workers a vote that lands on another worker is labelled ``model="unknown"`` and a
changed vote there counts again. Use one worker where those counts must be exact.

If a worker dies the gateway stops (exit 1), for a supervisor to restart it whole.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from infra.gateway.metrics import MULTIPROC_ENV

if TYPE_CHECKING:
    from infra.settings import Settings

log = logging.getLogger(__name__)


def serve_workers(
    settings: Settings,
    sockets: list[socket.socket],
    *,
    announce: Callable[[str], None],
    line: str,
) -> None:
    """Run ``settings.gateway.workers`` workers on ``sockets`` until interrupted.

    Raises:
        SystemExit: a worker died (exit status 1).
    """
    n = settings.gateway.workers
    metrics_dir = tempfile.mkdtemp(prefix="flywheel-gateway-metrics-")
    os.environ[MULTIPROC_ENV] = metrics_dir  # inherited by the workers, read at import there
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(
            target=_worker, args=(settings, sockets), name=f"gateway-worker-{i}", daemon=False
        )
        for i in range(n)
    ]
    stopping = False

    def stop(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    failed = False
    try:
        for worker in workers:
            worker.start()
        announce(f"{line} ({n} worker processes)")
        while not stopping:
            if any(not w.is_alive() for w in workers):
                failed = True
                log.error("a gateway worker exited; stopping the others")
                break
            time.sleep(0.2)
    finally:
        for worker in workers:
            if worker.is_alive() and worker.pid is not None:
                os.kill(worker.pid, signal.SIGTERM)  # uvicorn shuts down gracefully on it
        for worker in workers:
            worker.join(15)
            if worker.is_alive():
                worker.kill()
                worker.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(metrics_dir, ignore_errors=True)
        os.environ.pop(MULTIPROC_ENV, None)
    if failed:
        raise SystemExit(1)


def _worker(settings: Settings, sockets: list[socket.socket]) -> None:
    """One worker: its own app and uvicorn server on the inherited sockets."""
    import gc

    import uvicorn

    from infra.gateway.app import create_app
    from infra.gateway.asgi import by_port
    from infra.gateway.edge import server_options

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(settings)
    config = uvicorn.Config(
        by_port(app, sockets),
        **server_options(
            settings.gateway,
            admin_port=sockets[1].getsockname()[1] if len(sockets) > 1 else None,
            app=app,
        ),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
    gc.freeze()
    uvicorn.Server(config).run(sockets=sockets)
