"""The documentation site as MkDocs builds it: every page is in the nav (the generated ones
never committed), the generated references cover every setting, command and option, table and
key, and ``mkdocs build --strict`` passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deployments import cli
from tests.unit.docs_helpers import DOCS, ROOT, hooks, subparsers
from tests.unit.test_compose_env import settings_env_names


def test_every_page_is_in_the_nav() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)

    def files(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [f for item in nav for f in files(item)]
        if isinstance(nav, dict):
            return [f for value in nav.values() for f in files(value)]
        return []

    in_nav = set(files(config["nav"]))
    written = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert in_nav == written | set(hooks().GENERATED)
    assert not written & set(hooks().GENERATED), "generated pages are never committed"


# --------------------------------------------------------------- the generated references


def test_configuration_reference_lists_every_setting() -> None:
    page = hooks().configuration_page()
    missing = sorted(n for n in settings_env_names() if not n.endswith("*") and n not in page)
    assert not missing
    rows = hooks().settings_rows()
    by_env = {row["env"]: row for row in rows}
    port = by_env["FLYWHEEL_GATEWAY__PORT"]
    assert (port["type"], port["default"]) == ("int (≥ 0, ≤ 65535)", "8088")
    assert by_env["FLYWHEEL_GATEWAY__MAX_BODY_BYTES"]["description"] == "larger requests get 413"
    assert by_env["FLYWHEEL_CONSENT_MODE"]["description"].startswith("PIPA")
    assert by_env["FLYWHEEL_S3_ACCESS_KEY_ID / AWS_ACCESS_KEY_ID"]["default"] == "unset"


def test_cli_reference_lists_every_command_and_option() -> None:
    page = hooks().cli_page()
    parser = cli.build_parser()
    for cmd in cli.COMMANDS:
        assert f"## flywheel {cmd.name} " in page
    for sub in subparsers(parser).values():
        for action in sub._actions:
            for option in action.option_strings if action.dest != "help" else ():
                assert f"`{option}" in page or f", {option}" in page, (sub.prog, option)


def test_storage_reference_lists_every_table_and_key() -> None:
    from infra import catalog_schemas, keys

    page = hooks().storage_page()
    for table, schema in catalog_schemas.SCHEMAS.items():
        assert f"### flywheel.{table}" in page
        assert all(f"`{f.name}`" in page for f in schema)
    prefixes = [v for k, v in vars(keys).items() if k.endswith(("_PREFIX", "_KEY"))]
    assert prefixes and all(p in page for p in prefixes)


def test_mkdocs_build_strict_passes(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "reference/configuration/index.html").exists()
