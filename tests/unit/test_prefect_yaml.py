"""deployments/prefect.yaml: accepted by Prefect's own schema (the model `prefect deploy`
validates with), every entrypoint a `flows/<module>.py:<function>` that, where the module is
already written, defines that function as a @flow; schedules and run directory as intended."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PREFECT_YAML = ROOT / "deployments/prefect.yaml"
RAW: dict[str, Any] = yaml.safe_load(PREFECT_YAML.read_text())
DEPLOYMENTS: dict[str, dict[str, Any]] = {d["name"]: d for d in RAW["deployments"]}
ENTRYPOINT = re.compile(r"flows/(?P<module>[a-z_]+)\.py:(?P<function>[a-z_]+)")


def test_prefect_deploy_accepts_the_file() -> None:
    models = pytest.importorskip("prefect.cli.deploy._models")
    model = models.PrefectYamlModel.model_validate(RAW)
    assert [d.name for d in model.deployments] == list(DEPLOYMENTS)
    # the schema ignores unknown keys: a typo there would silently drop a setting
    allowed = set(models.DeploymentConfig.model_fields)
    for name, spec in DEPLOYMENTS.items():
        assert set(spec) <= allowed, f"{name}: unknown keys {set(spec) - allowed}"
    top = set(models.PrefectYamlModel.model_fields) | {"prefect-version", "definitions"}
    assert set(RAW) <= top, set(RAW) - top


def test_the_loop_and_every_stage_is_deployed() -> None:
    assert set(DEPLOYMENTS) == {
        "hourly",
        "collect",
        "score",
        "curate",
        "train-and-release",
        "train",
        "release",
        "rollback",
        "release-control",
        "run",
        "retention",
        "forget-user",
        "erasure-resolve",
    }
    assert DEPLOYMENTS["hourly"]["entrypoint"] == "flows/loop.py:hourly"
    assert DEPLOYMENTS["train-and-release"]["entrypoint"] == "flows/weekly.py:weekly"
    assert DEPLOYMENTS["forget-user"]["entrypoint"] == "flows/governance.py:forget_user"
    assert (
        DEPLOYMENTS["erasure-resolve"]["entrypoint"] == "flows/erasure_resolve.py:erasure_resolve"
    )


def _flows_in(path: Path) -> dict[str, str]:
    """function name -> flow name, for the module's top-level @flow functions."""
    flows: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for dec in node.decorator_list:
            call = dec if isinstance(dec, ast.Call) else None
            target = call.func if call else dec
            if isinstance(target, ast.Name) and target.id == "flow":
                flows[node.name] = node.name.replace("_", "-")  # Prefect's default name
                for kw in call.keywords if call else []:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        flows[node.name] = str(kw.value.value)
    return flows


@pytest.mark.parametrize("name", list(DEPLOYMENTS))
def test_entrypoint_is_a_flow(name: str) -> None:
    entry = DEPLOYMENTS[name]["entrypoint"]
    m = ENTRYPOINT.fullmatch(entry)
    assert m, f"{name}: entrypoint {entry!r} is not flows/<module>.py:<function>"
    path = ROOT / "flows" / f"{m['module']}.py"
    if not path.exists():  # written by another part of the project; checked once it exists
        return
    flows = _flows_in(path)
    assert m["function"] in flows, f"{entry}: no top-level @flow named {m['function']}"


def test_rollback_deployment_is_the_one_the_gateway_triggers() -> None:
    from infra.settings import Settings

    flow_name, deployment = Settings().prefect_rollback_deployment.split("/")
    assert deployment in DEPLOYMENTS
    path = ROOT / "flows/rollback.py"
    if path.exists():
        entry = ENTRYPOINT.fullmatch(DEPLOYMENTS[deployment]["entrypoint"])
        assert entry and _flows_in(path).get(entry["function"]) == flow_name


def _cron(name: str) -> list[str]:
    from prefect.client.schemas.schedules import CronSchedule

    (schedule,) = DEPLOYMENTS[name]["schedules"]
    CronSchedule(cron=schedule["cron"], timezone=schedule.get("timezone"))  # raises if invalid
    return schedule["cron"].split()


def test_schedules() -> None:
    minute, hour, dom, month, dow = _cron("hourly")
    assert minute.isdigit() and int(minute) > 0 and (hour, dom, month, dow) == ("*",) * 4
    minute, hour, dom, month, dow = _cron("retention")
    assert minute.isdigit() and hour.isdigit() and (dom, month, dow) == ("*",) * 3
    minute, hour, dom, month, dow = _cron("train-and-release")
    assert hour.isdigit() and dow.isdigit() and (dom, month) == ("*", "*")
    on_demand = {"collect", "score", "curate", "train", "release", "rollback", "forget-user"}
    assert not any(DEPLOYMENTS[n].get("schedules") for n in on_demand)
    assert DEPLOYMENTS["hourly"]["concurrency_limit"]["limit"] == 1  # hours never overlap


def test_flow_runs_start_in_the_directory_prefect_deploy_ran_in() -> None:
    (build,) = RAW["build"]
    step = build["prefect.deployments.steps.run_shell_script"]
    assert step["script"] == "pwd"
    (pull,) = RAW["pull"]
    directory = pull["prefect.deployments.steps.set_working_directory"]["directory"]
    assert directory == "{{ " + step["id"] + ".stdout }}"
    assert all("pull" not in d for d in DEPLOYMENTS.values())
