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

from tests.prefect_server import log_tail, prefect_server
from tests.procs import background

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SPECS: list[dict[str, Any]] = yaml.safe_load((REPO / "deployments/prefect.yaml").read_text())[
    "deployments"
]
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
TIMEOUT = 240.0


def request(api: httpx.Client, method: str, url: str, **kwargs: Any) -> Any:
    """The JSON answer; a 503 (the server's SQLite was busy: "retry") is retried."""
    for _ in range(20):
        response = api.request(method, url, **kwargs)
        if response.status_code != 503:
            return response.raise_for_status().json()
        time.sleep(0.5)
    return response.raise_for_status().json()


def served_deployments(api: httpx.Client, serving: Any, log: Path) -> dict[str, dict[str, Any]]:
    """name -> deployment, once every deployment of the file is registered."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = request(api, "POST", "/deployments/filter", json={})
        if len(found) >= len(SPECS):
            return {d["name"]: d for d in found}
        if serving.poll() is not None:
            pytest.fail(f"serve exited ({serving.returncode})\n{log_tail(log)}")
        time.sleep(1.0)
    pytest.fail(f"only {len(found)} of {len(SPECS)} deployments after {TIMEOUT} s\n{log_tail(log)}")


def finished_run(api: httpx.Client, run_id: str, serving: Any, log: Path) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        run = request(api, "GET", f"/flow_runs/{run_id}")
        if run["state_type"] in TERMINAL:
            return run
        if serving.poll() is not None:
            pytest.fail(f"serve exited ({serving.returncode})\n{log_tail(log)}")
        time.sleep(1.0)
    pytest.fail(f"flow run still {run['state_type']} after {TIMEOUT} s\n{log_tail(log)}")


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
            httpx.Client(base_url=server.api_url, timeout=30.0) as api,
        ):
            deployments = served_deployments(api, serving, log)
            assert set(deployments) == {spec["name"] for spec in SPECS}
            for spec in SPECS:
                deployment = deployments[spec["name"]]
                assert deployment["entrypoint"] == spec["entrypoint"]
                crons = [s["schedule"]["cron"] for s in deployment["schedules"]]
                assert crons == [s["cron"] for s in spec.get("schedules", [])], spec["name"]
                assert deployment["work_pool_name"] is None  # served: no pool, no worker
            hourly = request(api, "GET", "/deployments/name/hourly/hourly")
            assert hourly["id"] == deployments["hourly"]["id"]

            collect = deployments["collect"]
            url = f"/deployments/{collect['id']}/create_flow_run"
            created = request(api, "POST", url, json={"parameters": {"hours": 1}})
            run = finished_run(api, created["id"], serving, log)
            assert run["state_type"] == "COMPLETED", (
                f"{run['state_type']}: {run['state'].get('message')}\n{log_tail(log)}"
            )
            assert run["parameters"] == {"hours": 1}
    print(
        f"served {len(SPECS)} deployments and ran collect in {time.perf_counter() - started:.0f} s"
    )
