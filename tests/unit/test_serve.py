"""deployments/serve.py: what ``python -m deployments.serve`` would serve is exactly the
deployments of prefect.yaml, each built from its entrypoint's flow with the file's schedules,
parameters, tags and concurrency limit (no server needed to build them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deployments import serve

ROOT = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((ROOT / "deployments/prefect.yaml").read_text())


def test_every_deployment_of_the_file_is_read_in_order() -> None:
    specs = serve.read_specs()
    assert [s.name for s in specs] == [d["name"] for d in RAW["deployments"]]
    assert {s.name: s.entrypoint for s in specs} == {
        d["name"]: d["entrypoint"] for d in RAW["deployments"]
    }
    by_name = {s.name: s for s in specs}
    assert by_name["hourly"].schedule_text == "5 * * * * UTC"
    assert by_name["collect"].schedule_text == "on demand"


def test_names_filter_and_unknown_names() -> None:
    specs = serve.read_specs()
    assert [s.name for s in serve.select(specs, ["score", "collect"])] == ["collect", "score"]
    assert serve.select(specs, []) == specs
    with pytest.raises(ValueError, match="no deployment named nope"):
        serve.select(specs, ["collect", "nope"])


def test_list_prints_and_starts_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve.main(["--list", "collect", "retention"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["collect", "retention"]
    assert lines[1].split()[1:] == [
        "flows/governance.py:retention",
        "30",
        "3",
        "*",
        "*",
        "*",
        "UTC",
    ]


def test_deployments_are_built_as_the_file_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # serve runs there: entrypoints come out relative to it
    built = {s.name: serve.build_deployment(s) for s in serve.read_specs()}
    for spec in RAW["deployments"]:
        deployment = built[spec["name"]]
        assert deployment.entrypoint == spec["entrypoint"]
        assert deployment.tags == spec["tags"]
        assert deployment.description  # the flow's docstring, as the UI shows it
        crons = [(s.schedule.cron, s.schedule.timezone) for s in deployment.schedules or []]
        assert crons == [(s["cron"], s["timezone"]) for s in spec.get("schedules", [])]
        limit = spec.get("concurrency_limit")
        if limit:
            assert deployment.concurrency_limit == limit["limit"]
            options = deployment.concurrency_options
            assert options is not None
            assert options.collision_strategy.value == limit["collision_strategy"]
    assert built["collect"].flow_name == "collect"
    assert built["train-and-release"].flow_name == "train-and-release"
