"""A real `prefect server start` on loopback for end-to-end tests, with its own PREFECT_HOME.

Environment changes live only in the ``env`` handed to the subprocesses started here; the test
process's own environment (and the session's ephemeral Prefect API) is left alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from infra.errors import TransientError
from infra.retries import Backoff, retry_call
from tests.procs import background, free_port, wait_http

TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
RUN_TIMEOUT = 240.0
STARTUP_TIMEOUT = 180.0  # CPU seconds (tests.procs.wait_http): the first start migrates a fresh
# SQLite database, about 15 CPU seconds here


def prefect_cli() -> list[str]:
    """The `prefect` command of the interpreter running the tests."""
    exe = Path(sys.executable).with_name("prefect")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "prefect"]


@dataclass(frozen=True)
class PrefectServer:
    url: str  # http://127.0.0.1:<port>, the UI; the API is under /api
    env: dict[str, str]  # environment for child processes that talk to this server
    log: Path  # the server's own log (retryable errors too: 503s are logged with their cause)

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"


def log_tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


@contextmanager
def prefect_server(
    tmp: Path, *, extra_env: dict[str, str] | None = None
) -> Iterator[PrefectServer]:
    """Start `prefect server start` on a free loopback port (``extra_env`` added to its
    environment, e.g. a shorter scheduler loop); stop it when the block ends."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(tmp / "prefect-home"),
        PREFECT_API_URL=f"{url}/api",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_API_HOST="127.0.0.1",
        PREFECT_SERVER_API_PORT=str(port),
        PREFECT_LOGGING_LEVEL="INFO",
        PREFECT_SERVER_LOG_RETRYABLE_ERRORS="true",
    )
    env.update(extra_env or {})
    log_path = tmp / "prefect-server.log"
    args = [*prefect_cli(), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with background(args, log_path, env=env) as proc:
        try:
            wait_http(f"{url}/api/health", timeout=STARTUP_TIMEOUT, proc=proc, wall_cap=600)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n--- server log ---\n{log_tail(log_path)}") from exc
        if proc.poll() is not None:  # something else answered on the port
            raise RuntimeError(f"prefect server exited\n{log_tail(log_path)}")
        yield PrefectServer(url=url, env=env, log=log_path)


def run_cli(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 180.0
) -> subprocess.CompletedProcess[str]:
    """Run a `prefect ...` command to completion; fail with its output if it fails."""
    done = subprocess.run(
        [*prefect_cli(), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"prefect {' '.join(args)} exited {done.returncode}\n{done.stdout[-3000:]}"
            f"\n{done.stderr[-3000:]}"
        )
    return done


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _chromium_args(profile_dir: Path, budget_ms: int) -> list[str]:
    binary = chromium_binary()
    if binary is None:
        raise FileNotFoundError("chromium")
    return [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile_dir}",
        "--window-size=1400,1000",
        f"--virtual-time-budget={budget_ms}",
    ]


def screenshot(url: str, out: Path, profile_dir: Path, budget_ms: int = 20000) -> Path:
    """Save a headless-Chromium screenshot of ``url`` (a single-page app: virtual time lets it
    fetch from the API and render before the capture)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    args = [*_chromium_args(profile_dir, budget_ms), f"--screenshot={out}", url]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not out.exists():
        raise AssertionError(f"chromium exited {done.returncode}\n{done.stderr[-3000:]}")
    return out


def rendered_text(url: str, profile_dir: Path, budget_ms: int = 20000) -> str:
    """The DOM of ``url`` after the single-page app rendered, as headless Chromium sees it."""
    args = [*_chromium_args(profile_dir, budget_ms), "--dump-dom", url]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError(f"chromium exited {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout


class ServerBusy(TransientError):
    """The server answered 503: its SQLite database was busy, "retry"."""


class BusyRetryTransport(httpx.HTTPTransport):
    """Retries a 503 the way Prefect's own client does (the server sends it while its SQLite
    database is locked, which a loaded machine makes common), with the one retry policy of
    :mod:`infra.retries`."""

    POLICY = Backoff(attempts=12, base_s=0.25, max_s=4.0)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        def once() -> httpx.Response:
            response = super(BusyRetryTransport, self).handle_request(request)
            if response.status_code == 503:
                response.read()
                response.close()
                raise ServerBusy(f"{request.method} {request.url.path}: 503")
            return response

        return retry_call(once, operation="test.prefect_api", policy=self.POLICY)


def api_client(server: PrefectServer) -> httpx.Client:
    """A client of ``server``'s REST API that waits out its busy 503s."""
    return httpx.Client(base_url=server.api_url, timeout=30.0, transport=BusyRetryTransport())


def api_json(api: httpx.Client, method: str, url: str, **kwargs: Any) -> Any:
    """The JSON answer of the server's REST API (``api`` from :func:`api_client`)."""
    return api.request(method, url, **kwargs).raise_for_status().json()


def wait_for_run(
    api: httpx.Client, run_id: str, *, process: subprocess.Popen[bytes], log: Path
) -> dict[str, Any]:
    """The flow run once it is in a terminal state; fails the test with ``log``'s tail when
    ``process`` (the worker or serve process running it) exits or the run takes too long."""
    deadline = time.monotonic() + RUN_TIMEOUT
    run: dict[str, Any] = {}
    while time.monotonic() < deadline:
        run = api_json(api, "GET", f"/flow_runs/{run_id}")
        if run["state_type"] in TERMINAL:
            return run
        if process.poll() is not None:
            pytest.fail(f"{process.args!r} exited ({process.returncode})\n{log_tail(log)}")
        time.sleep(1.0)
    pytest.fail(f"flow run still {run.get('state_type')} after {RUN_TIMEOUT} s\n{log_tail(log)}")
