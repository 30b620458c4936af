"""Schedules really fire: against a real `prefect server start` from the project's venv, the
`hourly` deployment's cron schedule creates scheduled runs within a minute of deployment, and a
short interval schedule produces a run that a worker picks up and completes.

With SQLAlchemy 2.1 Prefect 3.8's scheduler failed every loop ("Can't evaluate bulk DML
statement"), so schedules showed as active in the UI and never created a run; runs started by
hand worked, which is why only a test like this one notices."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.prefect_server import (
    TERMINAL,
    api_client,
    log_tail,
    prefect_cli,
    prefect_server,
    run_cli,
)
from tests.procs import background

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
POOL = "flywheel-process"


def runs_of(api: httpx.Client, deployment_id: str) -> list[dict[str, Any]]:
    body = {"deployments": {"id": {"any_": [deployment_id]}}, "limit": 200}
    return list(api.post("/flow_runs/filter", json=body).raise_for_status().json())


def wait_until(what: str, check: Any, timeout: float, log: Path) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(2.0)
    pytest.fail(f"{what} not seen within {timeout:.0f} s\n--- server log ---\n{log_tail(log)}")


def test_hourly_schedule_creates_runs_and_a_worker_completes_one(tmp_path: Path) -> None:
    extra = {"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5"}
    with prefect_server(tmp_path, extra_env=extra) as server:
        env = dict(server.env)
        server_log = tmp_path / "prefect-server.log"
        run_cli(["work-pool", "create", POOL, "--type", "process"], env, REPO)
        run_cli(
            ["--no-prompt", "deploy", "--prefect-file", "deployments/prefect.yaml", "-n", "hourly"],
            env,
            REPO,
        )
        deployed_at = time.monotonic()
        with api_client(server) as api:
            deployment = api.get("/deployments/name/hourly/hourly").raise_for_status().json()
            assert deployment["schedules"], "the hourly deployment has no schedule"
            scheduled = wait_until(
                "a scheduled run of hourly",
                lambda: [r for r in runs_of(api, deployment["id"]) if r["auto_scheduled"]],
                timeout=60.0,
                log=server_log,
            )
            print(
                f"{len(scheduled)} runs scheduled {time.monotonic() - deployed_at:.0f} s after deploy"
            )
            assert all(r["state_type"] == "SCHEDULED" for r in scheduled)
            assert "Can't evaluate bulk DML" not in log_tail(server_log, 200_000)

            # A schedule due now: the worker must run what the scheduler created.
            api.post(
                f"/deployments/{deployment['id']}/schedules",
                json=[{"schedule": {"interval": 20.0}, "active": True}],
            ).raise_for_status()
            worker_env = {
                **env,
                "FLYWHEEL_HOME": str(tmp_path / "flywheel-home"),
                "PREFECT_WORKER_QUERY_SECONDS": "2",
            }
            worker_log = tmp_path / "worker.log"
            args = [*prefect_cli(), "worker", "start", "--pool", POOL, "--name", "schedules"]
            with background(args, worker_log, env=worker_env, cwd=tmp_path):
                done = wait_until(
                    "a scheduled run completed by the worker",
                    lambda: [
                        r
                        for r in runs_of(api, deployment["id"])
                        if r["auto_scheduled"] and r["state_type"] in TERMINAL
                    ],
                    timeout=300.0,
                    log=worker_log,
                )
            assert done[0]["state_type"] == "COMPLETED", (
                f"{done[0]['state_type']}: {done[0]['state'].get('message')}\n{log_tail(worker_log)}"
            )
