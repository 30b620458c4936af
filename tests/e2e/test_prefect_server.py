"""What an operator does on one machine, against a real `prefect server start` on loopback:
create the work pool, deploy from deployments/prefect.yaml, start a worker, trigger the
`collect/collect` deployment through the REST API and see the run complete; then a screenshot
of the deployment's parameter form in headless Chromium, kept as a test artifact."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.prefect_server import (
    api_client,
    chromium_binary,
    log_tail,
    prefect_cli,
    prefect_server,
    rendered_text,
    run_cli,
    screenshot,
    wait_for_run,
)
from tests.procs import background

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
POOL = "flywheel-process"


def artifacts_dir() -> Path:
    return Path(os.environ.get("FLYWHEEL_TEST_ARTIFACTS") or REPO / "test-artifacts")


def test_deployment_runs_on_a_real_server_and_its_form_renders(tmp_path: Path) -> None:
    started = time.perf_counter()
    with prefect_server(tmp_path) as server:
        env = dict(server.env)
        run_cli(["work-pool", "create", POOL, "--type", "process"], env, REPO)
        deployed = run_cli(
            [
                "--no-prompt",
                "deploy",
                "--prefect-file",
                "deployments/prefect.yaml",
                "-n",
                "collect",
            ],
            env,
            REPO,
        )
        assert "collect/collect" in deployed.stdout, deployed.stdout[-2000:]

        with api_client(server) as api:
            deployment = api.get("/deployments/name/collect/collect").raise_for_status().json()
            assert deployment["work_pool_name"] == POOL
            assert {"window_start", "hours"} <= set(
                deployment["parameter_openapi_schema"]["properties"]
            )

            worker_env = {
                **env,
                "FLYWHEEL_HOME": str(tmp_path / "flywheel-home"),
                "PREFECT_WORKER_QUERY_SECONDS": "2",
            }
            worker_log = tmp_path / "worker.log"
            worker_args = [*prefect_cli(), "worker", "start", "--pool", POOL, "--name", "e2e"]
            with background(worker_args, worker_log, env=worker_env, cwd=tmp_path) as worker:
                created = api.post(
                    f"/deployments/{deployment['id']}/create_flow_run",
                    json={"parameters": {"hours": 1}},
                )
                flow_run = created.raise_for_status().json()
                run = wait_for_run(api, flow_run["id"], process=worker, log=worker_log)
                assert run["state_type"] == "COMPLETED", (
                    f"{run['state_type']}: {run['state'].get('message')}\n{log_tail(worker_log)}"
                )
                assert run["parameters"] == {"hours": 1}
        print(f"deployed and ran collect/collect in {time.perf_counter() - started:.0f} s")

        if chromium_binary() is None:
            pytest.skip(
                "no chromium binary (apt-get install chromium; .ci/run does): the deployment "
                "ran and completed, only the parameter-form screenshot was skipped"
            )
        form_url = f"{server.url}/deployments/deployment/{deployment['id']}/run"
        png = screenshot(
            form_url,
            artifacts_dir() / "prefect-deployment-form.png",
            tmp_path / "chromium-profile",
        )
        print(f"parameter form screenshot: {png}")
        dom = rendered_text(form_url, tmp_path / "chromium-profile")
        for label in ("Parameters", "window_start", "hours", "flywheel-process", "Submit"):
            assert label in dom, f"{label!r} not on the rendered run form (see {png})"
