"""What the Prefect UI shows of a flow: its description keeps every path a docstring names and
leaves the Args block to the form; a served form offers only the configured workloads."""

from __future__ import annotations

from deployments.serve import DeploymentSpec, limit_workloads, listing
from flows.release import release
from flows.rollback import rollback
from infra.flow_docs import ui_description


def test_a_description_keeps_angle_bracket_paths_and_drops_the_args_block() -> None:
    text = ui_description(release.fn.__doc__)
    assert text is not None
    assert "gates/&lt;version&gt;/" in text  # `gates/<version>/` was read as a tag: gates//
    assert "Args:" not in text and release.description == text
    assert "Args:" not in (rollback.description or "")
    assert ui_description("see `models/<v>/`\n\nArgs:\n    x: y") == "see `models/<v>/`"


def test_a_served_workload_field_offers_the_configured_workloads() -> None:
    props = {"workload": {"anyOf": [{"type": "string", "pattern": "^x$"}, {"type": "null"}]}}
    limit_workloads([props], ["sql", "chat"])
    assert props["workload"]["anyOf"][0] == {"type": "string", "enum": ["default", "chat", "sql"]}


def test_the_listing_aligns_long_entry_points() -> None:
    specs = [
        DeploymentSpec(name="a", entrypoint="flows/x.py:x"),
        DeploymentSpec(
            name="release-control", entrypoint="flows/release_control.py:release_control"
        ),
    ]
    lines = listing(specs).splitlines()
    assert lines[0].index("on demand") == lines[1].index("on demand")
