"""Blocking I/O off the event loop in daemon threads.

``asyncio.to_thread`` uses the loop's default executor, which ``asyncio.run`` joins at exit: a
sink or store call stuck on a dead host would then hold up the gateway's shutdown. A daemon
thread per call (at most a few per second here) never does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_in_daemon_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in a new daemon thread and await its result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def run() -> None:
        callback: Callable[[Any], None]
        value: Any
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            callback, value = future.set_exception, exc
        else:
            callback, value = future.set_result, result
        with contextlib.suppress(RuntimeError):  # the loop is gone (shutdown): no one waits
            loop.call_soon_threadsafe(deliver, callback, value)

    threading.Thread(target=run, name="gateway-io", daemon=True).start()
    return await future
