"""The last word of a control flow's run (rollback, release-control, erasure-resolve): a small
Markdown artifact saying what the run did or why it did nothing, so that an operator who
started it from the Prefect UI reads the outcome on the run's Artifacts tab (its log line says
the same on the Logs tab)."""

from __future__ import annotations

from collections.abc import Mapping

from prefect.artifacts import create_markdown_artifact


def _cell(value: object) -> str:
    """A table cell: ``-`` for nothing; characters Markdown or HTML would eat escaped."""
    if value is None or value == "":
        return "-"
    text = str(value).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("\n", " ")


def outcome_markdown(summary: str, details: Mapping[str, object]) -> str:
    """``summary`` in bold, then ``details`` as a two-column table."""
    rows = "".join(f"| {key} | {_cell(value)} |\n" for key, value in details.items())
    return f"**{_cell(summary)}**\n\n| | |\n|---|---|\n{rows}"


def publish_outcome(*, key: str, summary: str, details: Mapping[str, object]) -> None:
    """The run's ``key`` artifact: ``summary`` (one sentence: what was done, or why nothing
    was) and ``details`` (counts, versions, names: never personal data)."""
    create_markdown_artifact(
        key=key, markdown=outcome_markdown(summary, details), description=summary
    )
