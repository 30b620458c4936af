"""What a person sees while a command works, on stderr (stdout keeps the summary):

- the steps of ``flywheel run`` and ``bootstrap`` (:mod:`infra.progress`): a live bar in a
  terminal, plain timestamped lines otherwise (CI logs, ``make run | tee``);
- a line when the local Prefect API starts (it takes a while, and nothing else says so);
- the flow and task runs' own logs (failures with their tracebacks, warnings) kept off the
  console, unless ``--debug``: they stay in the run's logs in the Prefect API, and the CLI
  prints a summary and one line per error.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from infra.errors import ConfigError
from infra.progress import LOGGER_NAME, Progress

HEARTBEAT_S = 30.0  # plain output: repeat a long step's line this often, so CI sees life
BAR_WIDTH = 24


class ProgressRenderer(logging.Handler):
    """Renders :class:`~infra.progress.Progress` records: a timestamped line per new step,
    and in a terminal a bar below them that moves within the step."""

    def __init__(self, stream: TextIO, *, live: bool) -> None:
        super().__init__(logging.INFO)
        self.stream, self.live = stream, live
        self.started = time.monotonic()
        self._step: tuple[str, str] | None = None
        self._last_line = 0.0
        self._bar_shown = False

    def emit(self, record: logging.LogRecord) -> None:
        """Draw one progress record (a bar on a terminal, a line otherwise)."""
        event = getattr(record, "progress", None)
        if not isinstance(event, Progress):
            return
        now = time.monotonic()
        new_step = (event.job, event.step) != self._step
        if new_step or (not self.live and now - self._last_line >= HEARTBEAT_S):
            self._clear_bar()
            stamp = time.strftime("%H:%M:%S")
            self.stream.write(f"{stamp} {event.job} [{event.done}/{event.total}] {event.step}\n")
            self._step, self._last_line = (event.job, event.step), now
        if self.live:
            self._draw_bar(event, now)
        self.stream.flush()

    def _draw_bar(self, event: Progress, now: float) -> None:
        filled = round(BAR_WIDTH * event.done / event.total)
        elapsed = int(now - self.started)
        line = (
            f"{event.job} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] "
            f"{event.done}/{event.total} {elapsed // 60}:{elapsed % 60:02d} {event.step}"
        )
        width = shutil.get_terminal_size((80, 20)).columns - 1
        self.stream.write("\r\033[K" + line[:width])
        self._bar_shown = True

    def _clear_bar(self) -> None:
        if self._bar_shown:
            self.stream.write("\r\033[K")
            self._bar_shown = False

    def close(self) -> None:
        """End the bar's line."""
        self._clear_bar()
        self.stream.flush()
        super().close()


@contextmanager
def showing_progress(stream: TextIO | None = None) -> Iterator[ProgressRenderer]:
    """Render progress reports to ``stream`` (stderr) while the block runs."""
    stream = stream or sys.stderr
    renderer = ProgressRenderer(stream, live=_is_terminal(stream))
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(renderer)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield renderer
    finally:
        logger.removeHandler(renderer)
        renderer.close()


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def say(command: str, message: str) -> None:
    """A status line on stderr (``flywheel collect: starting the local Prefect API ...``)."""
    print(f"flywheel {command}: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- Prefect


class _NoRunLogsOnConsole(logging.Filter):
    """Flow and task runs log to the Prefect API (the run's logs in the UI) and to the console;
    on the console of a CLI that prints its own summary and one line per error, their records
    (failures with 18-98 lines of traceback, warnings the summary repeats) are noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith(("prefect.flow_runs", "prefect.task_runs"))


def quiet_prefect_console() -> None:
    """Keep the runs' logs (failures with tracebacks included) off the console, and the local
    Prefect API's own (it runs in a child process that inherits this environment): under load
    its event writer logs "Error flushing events" and retries, which is no news to a user
    reading a stage's summary. ``--debug`` shows both; an explicit
    PREFECT_SERVER_LOGGING_LEVEL wins."""
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
    import prefect.main  # noqa: F401 - importing Prefect configures its logging
    from prefect.logging.handlers import PrefectConsoleHandler

    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler) and not any(
            isinstance(f, _NoRunLogsOnConsole) for f in handler.filters
        ):
            handler.addFilter(_NoRunLogsOnConsole())


def ensure_prefect_api(command: str) -> None:
    """Before a flow run: with no ``PREFECT_API_URL``, start the local (ephemeral) Prefect API
    now, saying so (the first start takes seconds); with one, check that it can be reached.

    Raises:
        ConfigError: ``PREFECT_API_URL`` is set but the API does not answer.
    """
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    url = PREFECT_API_URL.value()
    if url:
        _check_api(str(url))
        return
    if not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return  # Prefect itself says that PREFECT_API_URL is needed
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the instance the flow run's client will use
    if server.running:
        return
    say(command, "starting the local Prefect API (set PREFECT_API_URL to use a server) ...")
    started = time.monotonic()
    server.start()
    say(
        command, f"local Prefect API ready at {server.api_url} ({time.monotonic() - started:.0f} s)"
    )


def _check_api(url: str) -> None:
    import httpx

    from infra.http import tls

    try:  # any answer will do (Prefect Cloud wants a key even for /health)
        httpx.get(url.rstrip("/") + "/health", timeout=10, verify=tls())
    except httpx.TransportError as exc:
        raise ConfigError(
            f"the Prefect API at {url} (PREFECT_API_URL) does not answer: {type(exc).__name__}"
        ) from None
