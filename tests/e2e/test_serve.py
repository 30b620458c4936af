"""One machine, no work pool and no worker: ``python -m deployments.serve`` against a real
`prefect server start` on loopback registers every deployment of deployments/prefect.yaml
(with its schedule), and a run of one of them triggered through the REST API completes."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.prefect_server import api_client, api_json, log_tail, prefect_server, wait_for_run
from tests.procs import background

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SPECS: list[dict[str, Any]] = yaml.safe_load((REPO / "deployments/prefect.yaml").read_text())[
    "deployments"
]
TIMEOUT = 240.0


def served_deployments(api: httpx.Client, serving: Any, log: Path) -> dict[str, dict[str, Any]]:
    """name -> deployment, once every deployment of the file is registered."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = api_json(api, "POST", "/deployments/filter", json={})
        if len(found) >= len(SPECS):
            return {d["name"]: d for d in found}
        if serving.poll() is not None:
            pytest.fail(f"serve exited ({serving.returncode})\n{log_tail(log)}")
        time.sleep(1.0)
    pytest.fail(f"only {len(found)} of {len(SPECS)} deployments after {TIMEOUT} s\n{log_tail(log)}")


def test_serve_registers_every_deployment_and_runs_one(tmp_path: Path) -> None:
    started = time.perf_counter()
    with prefect_server(tmp_path) as server:
        env = {
            **server.env,
            "FLYWHEEL_HOME": str(tmp_path / "flywheel-home"),
            "PREFECT_RUNNER_POLL_FREQUENCY": "2",
        }
        log = tmp_path / "serve.log"
        args = [sys.executable, "-m", "deployments.serve"]
        with (
            background(args, log, env=env, cwd=REPO) as serving,
            api_client(server) as api,
        ):
            deployments = served_deployments(api, serving, log)
            assert set(deployments) == {spec["name"] for spec in SPECS}
            for spec in SPECS:
                deployment = deployments[spec["name"]]
                assert deployment["entrypoint"] == spec["entrypoint"]
                crons = [s["schedule"]["cron"] for s in deployment["schedules"]]
                assert crons == [s["cron"] for s in spec.get("schedules", [])], spec["name"]
                assert deployment["work_pool_name"] is None  # served: no pool, no worker
            hourly = api_json(api, "GET", "/deployments/name/hourly/hourly")
            assert hourly["id"] == deployments["hourly"]["id"]

            collect = deployments["collect"]
            url = f"/deployments/{collect['id']}/create_flow_run"
            created = api_json(api, "POST", url, json={"parameters": {"hours": 1}})
            run = wait_for_run(api, created["id"], process=serving, log=log)
            assert run["state_type"] == "COMPLETED", (
                f"{run['state_type']}: {run['state'].get('message')}\n{log_tail(log)}"
            )
            assert run["parameters"] == {"hours": 1}
    print(
        f"served {len(SPECS)} deployments and ran collect in {time.perf_counter() - started:.0f} s"
    )
