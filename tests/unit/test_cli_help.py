"""What a new user reads: a help line for every argument, no Sphinx markup in ``--help`` or in
the Prefect UI's forms, the same ``--hours`` limit in the CLI and the form, the release form's
options shown as fields, accuracy printed one way, ``flywheel report``, and a pyproject that
installs without a deprecation warning."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from prefect.utilities.callables import parameter_schema
from prefect.utilities.schema_tools.validation import ValidationError, validate

from deployments import cli, commands, serve
from infra.parameters import MAX_HOURS
from tests.unit.test_cli_input import flywheel, one_error_line

ROOT = Path(__file__).resolve().parents[2]
SPHINX = re.compile(r"``|:(class|func|mod|meth|data|attr):")


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_argument_of_every_command_has_a_help_line() -> None:
    missing = [
        f"{name} {a.dest}"
        for name, p in subparsers().items()
        for a in p._actions
        if not isinstance(a, argparse._HelpAction) and not a.help
    ]
    assert not missing, missing


def test_help_says_what_the_options_new_users_asked_about_do() -> None:
    helps = {name: p.format_help() for name, p in subparsers().items()}
    assert "optimizer steps" in helps["train"]
    assert (
        "straight to the canary" in helps["release"]
        and "candidate model version" in helps["release"]
    )
    assert "improvement cycles, 0-20" in helps["run"] and "seed of the base model" in helps["run"]
    assert "grant: the user's traces may train" in helps["consent"]
    assert f"1-{MAX_HOURS}" in helps["collect"]


def test_no_sphinx_markup_in_any_help() -> None:
    texts = [cli.build_parser().format_help(), *(p.format_help() for p in subparsers().values())]
    marked = [t.splitlines()[0] for t in texts if SPHINX.search(t)]
    assert not marked, marked


def _texts(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [v for k, v in node.items() if k in ("description", "title") and isinstance(v, str)]
        return own + [t for k, v in node.items() for t in _texts(v) if k != "description"]
    if isinstance(node, list):
        return [t for v in node for t in _texts(v)]
    return []


SCHEMAS = {
    s.name: (serve.load_flow(s.entrypoint), parameter_schema(serve.load_flow(s.entrypoint)))
    for s in serve.read_specs()
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_no_sphinx_markup_in_the_ui_descriptions_and_forms(name: str) -> None:
    flow, schema = SCHEMAS[name]
    texts = [flow.description or "", *_texts(schema.model_dump_for_openapi())]
    assert not [t for t in texts if SPHINX.search(t)]


def test_hours_has_the_same_limit_in_the_cli_and_the_ui_form() -> None:
    form = SCHEMAS["collect"][1].model_dump_for_openapi()
    parser = cli.build_parser()
    for hours, ok in ((1, True), (MAX_HOURS, True), (MAX_HOURS + 1, False), (0, False)):
        try:
            validate({"hours": hours}, form, raise_on_error=True)
            form_ok = True
        except ValidationError:
            form_ok = False
        try:
            parser.parse_args(["collect", "--hours", str(hours)])
            cli_ok = True
        except SystemExit:
            cli_ok = False
        assert form_ok == cli_ok == ok, hours


def test_the_release_form_shows_its_options_as_fields() -> None:
    options = SCHEMAS["release"][1].model_dump_for_openapi()["properties"]["options"]
    assert "anyOf" not in options  # not "ReleaseOptions | None", a type to pick first
    assert options["$ref"].endswith("/ReleaseOptions")
    assert options["default"]["skip_shadow"] is False


def test_accuracy_is_printed_as_a_percent_everywhere() -> None:
    from tasks.demo.bootstrap import BootstrapResult
    from tasks.demo.cycles import percent
    from tasks.prove.report import pct

    boot = BootstrapResult(
        version="v0",
        model_dir=Path("m"),
        golden_accuracy=0.495,
        cached=True,
        input_hash="h",
        wall_s=1.0,
        n_params=1,
        source="trained",
    )
    assert str(commands.Percent(0.495)) == percent(0.495) == pct(0.495) == "49.5%"
    assert "golden accuracy 49.5%" in boot.describe()


def test_pyproject_license_is_an_spdx_expression() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"  # a TOML table is deprecated by setuptools


def test_report_prints_the_gate_report_or_says_there_is_none(tmp_path: Path) -> None:
    from infra.settings import Settings
    from infra.store import open_store

    store = open_store(Settings(home=tmp_path / "fw"))
    store.put("gates/v1/report.md", b"# Gate v1\n\n**Decision: ROLLBACK**\n")
    store.put("gates/v1/report.json", json.dumps({"decision": "ROLLBACK"}).encode())

    text = flywheel("report", "v1", home=tmp_path)
    as_json = flywheel("report", "v1", "--json", home=tmp_path)
    missing = flywheel("report", "v9", home=tmp_path)

    assert text.returncode == 0 and "**Decision: ROLLBACK**" in text.stdout, text.stderr
    assert json.loads(as_json.stdout)["decision"] == "ROLLBACK"
    assert missing.returncode == 2
    assert "flywheel release v9" in one_error_line(missing, "flywheel report: error: no gate")


def test_the_local_prefect_apis_own_error_logs_stay_off_a_stage_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ephemeral API runs in a child process that inherits the CLI's environment; its
    event writer logs "Error flushing events" under load (and retries)."""
    from deployments.progress import quiet_prefect_console

    monkeypatch.delenv("PREFECT_SERVER_LOGGING_LEVEL", raising=False)
    quiet_prefect_console()
    server_log = (
        "import logging, prefect.main; logging.getLogger("
        "'prefect.server.events.services.event_persister').error('Error flushing events')"
    )
    loud = {k: v for k, v in os.environ.items() if k != "PREFECT_SERVER_LOGGING_LEVEL"}
    for env, shown in ((loud, True), (dict(os.environ), False)):
        done = subprocess.run(
            [sys.executable, "-c", server_log],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert ("Error flushing events" in done.stderr) == shown
