"""The plumbing of ``flywheel run`` (the ``run`` flow, :mod:`flows.loop`): the gateway it starts
on loopback, the simulated users who keep coming while a candidate is in shadow and canary,
each demo workload's verifier, its hourly windows, and its steps as the progress bar shows
them. Where it serves its models: :mod:`tasks.demo.serving`."""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from infra.progress import report_progress
from infra.runtime import Runtime
from infra.settings import get_settings
from tasks.demo.serving import Server, environment
from tasks.demo.simulate import simulate
from tasks.demo.workloads import VERIFIERS, of_settings, tagged

log = logging.getLogger(__name__)


def demo_verifiers(server: Server) -> dict[str, str]:
    """Each demo workload's verifier (FLYWHEEL_REWARD__VERIFIERS) when the demo runs several
    workloads on the local server, unless the user set some."""
    settings = get_settings()
    if server != "local" or settings.reward.verifiers or not tagged(of_settings(settings)):
        return {}
    return {"FLYWHEEL_REWARD__VERIFIERS": json.dumps(VERIFIERS)}


@dataclass
class Steps:
    """The steps of ``flywheel run``, reported as they start (:mod:`infra.progress`)."""

    total: int
    done: int = 0

    def start(self, step: str) -> None:
        """Report ``step`` as started (the bar counts it done)."""
        report_progress("run", step, done=self.done, total=self.total)
        self.done = min(self.total, self.done + 1)

    def finish(self) -> None:
        """Report the run as finished (the bar full)."""
        report_progress("run", "done", done=self.total, total=self.total)


def hourly_windows(start: datetime, end: datetime) -> list[datetime]:
    """The starts of the hourly windows from ``start``'s hour to ``end``'s, both included."""
    first = start.replace(minute=0, second=0, microsecond=0)
    n = int((end - first).total_seconds() // 3600) + 1
    return [first + timedelta(hours=i) for i in range(n)]


@contextmanager
def embedded_gateway(
    rt: Runtime, *, diverse_fraction: float, diverse_temperatures: list[float]
) -> Iterator[str]:
    """The gateway on a free loopback port for this run; flows reach it through settings
    (environment variables set for the run and restored after it, so nothing outlives it).

    The demo samples every request several times (production's default is 30 %): a small
    simulated population needs the prompt groups to give enough preference pairs."""
    from infra.gateway.serve import start_background_gateway

    token = rt.settings.gateway.admin_token
    secret = token.get_secret_value() if token else secrets.token_hex(16)
    with environment(FLYWHEEL_GATEWAY__ADMIN_TOKEN=secret):
        settings = get_settings()
        gateway = settings.gateway.model_copy(
            update={
                "diverse_fraction": diverse_fraction,
                "diverse_temperatures": diverse_temperatures,
            }
        )
        handle = start_background_gateway(
            settings.model_copy(update={"gateway": gateway}), host="127.0.0.1", port=0
        )
        try:
            urls = {"FLYWHEEL_GATEWAY__URL": handle.url}
            urls["FLYWHEEL_GATEWAY__ADMIN_URL"] = handle.admin_url or ""
            with environment(**urls):
                yield handle.url
        finally:
            handle.stop()


@contextmanager
def background_traffic(
    gateway_url: str, *, requests: int, concurrency: int, seed: int
) -> Iterator[None]:
    """Simulated users keep coming while the candidate is in shadow and canary: bursts of
    ``requests`` (burst n seeded ``seed + n``) until the block ends."""
    stop = threading.Event()

    def traffic() -> None:
        burst = 0
        while not stop.is_set():
            burst += 1
            try:
                simulate(
                    gateway_url,
                    requests=requests,
                    concurrency=concurrency,
                    seed=seed + burst,
                    settings=get_settings(),
                )
            except Exception as exc:  # noqa: BLE001 - traffic is best effort; release decides
                log.warning("background traffic burst failed: %s", type(exc).__name__)
                stop.wait(1.0)

    thread = threading.Thread(target=traffic, name="release-traffic", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=60)
