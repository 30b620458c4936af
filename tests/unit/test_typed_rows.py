"""The typed rows of :mod:`tasks.datasets` and the schemas the stages write cannot drift: a
row type has exactly its table's columns, and mypy rejects a key that is not one of them."""

from __future__ import annotations

import typing

import pytest

from infra.audit import AuditRow
from infra.catalog_schemas import SCHEMAS
from tasks import datasets
from tasks.golden_proposals import ProposalRow
from tasks.release.gate.agreement import OutcomeRow
from tasks.review import ReviewItem
from tasks.reward import RewardColumns

TYPED_ROWS = {
    "rollouts": (datasets.Rollout, datasets.ROLLOUT_SCHEMA),
    "scores": (datasets.Score, datasets.SCORE_SCHEMA),
    "training_examples": (datasets.TrainingExample, SCHEMAS["training_examples"]),
    "preference_pairs": (datasets.PreferencePair, SCHEMAS["preference_pairs"]),
    "eval_results": (datasets.EvalResult, SCHEMAS["eval_results"]),
    "quarantine": (datasets.Quarantine, SCHEMAS["quarantine"]),
    "review_queue": (ReviewItem, SCHEMAS["review_queue"]),
    "audit_log": (AuditRow, SCHEMAS["audit_log"]),
    "golden_proposals": (ProposalRow, SCHEMAS["golden_proposals"]),
    "release_outcomes": (OutcomeRow, SCHEMAS["release_outcomes"]),
}


@pytest.mark.parametrize("table", sorted(TYPED_ROWS))
def test_row_type_has_exactly_the_schema_columns(table: str) -> None:
    row, schema = TYPED_ROWS[table]
    assert sorted(typing.get_type_hints(row)) == sorted(schema.names)


def test_reward_columns_and_buffer_columns_are_columns_of_their_tables() -> None:
    assert set(typing.get_type_hints(RewardColumns)) <= set(datasets.SCORE_SCHEMA.names)
    examples = SCHEMAS["training_examples"].names
    assert [c for c in examples if c in datasets.BUFFER_COLUMNS] == list(datasets.BUFFER_COLUMNS)
    assert (
        tuple(
            c
            for c in datasets.SCORE_SCHEMA.names
            if c.startswith("reward") and c != "reward_config_hash"
        )
        == datasets.REWARD_COLUMNS
    )


def test_mypy_rejects_a_key_a_row_does_not_have(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage that reads a column its input does not have (or a non-column like curate's
    ``_dedup_key`` on a rollout) fails ``make lint``. Runs mypy on a small module with the
    repository's cache, which ``make lint`` (first in CI) has filled: a few seconds then."""
    from pathlib import Path

    from mypy import api

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)  # mypy finds the project's packages from the working directory
    snippet = (
        "from tasks.datasets import Rollout, TrainingExample\n"
        "def good(row: TrainingExample) -> float:\n"
        "    return row['reward'] + 1.0\n"
        "def bad(row: Rollout) -> str:\n"
        "    return row['_dedup_key']\n"
    )
    out, _err, status = api.run(
        ["--config-file", str(root / "pyproject.toml"), "--cache-dir", str(root / ".mypy_cache")]
        + ["-c", snippet]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1
    assert len(errors) == 1
    assert 'TypedDict "Rollout" has no key "_dedup_key"' in errors[0]
