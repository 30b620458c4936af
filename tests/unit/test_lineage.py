"""The typed lineage writes exactly the files the dict-based code wrote, and reads them back.

``tests/data/lineage/`` holds lineage.json, model_card.yaml and the train-summary markdown of
one dpo, rft and grpo run, written by the code before :class:`Lineage` existed (fixed inputs
below: the same rows, settings, metrics and times)."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.settings import CurateSettings, Settings, get_settings
from tasks.demo import domain
from tasks.train.config import TrainConfig
from tasks.train.lineage import (
    CARD,
    LINEAGE,
    Evaluation,
    Lineage,
    build_lineage,
    card_markdown,
    lineage_files,
    model_card,
)
from tasks.train.methods import Method, MethodChoice
from tasks.train.pairs import GoldenFilter, Selection, select
from tasks.train.plan import TrainRun
from tasks.train.trainer import TrainOutcome
from tasks.train.user_lineage import LineageView

DATA = Path(__file__).parent.parent / "data" / "lineage"
WINDOW = "2026-03-02T09:00:00Z"
FINISHED = "2026-03-02T12:05:00.123456+00:00"
METHODS: dict[Method, tuple[int | None, int | None]] = {
    "dpo": (987654321, 55),
    "rft": (None, None),
    "grpo": (None, 56),
}


def _selection() -> Selection:
    """Four prompt groups (right vs wrong answer) of three users, plus one golden question."""
    rng = random.Random(3)
    rows: list[dict[str, Any]] = []
    for i in range(4):
        item = domain.sample_question(rng)
        for j, (answer, reward) in enumerate(((item.reference, 0.9), ("0", 0.1))):
            rows.append(
                {
                    "trace_id": f"t{i}-{j}",
                    "prompt_group": f"g{i}",
                    "user_key": f"key-{i % 3}",
                    "question": item.question,
                    "contexts": item.contexts,
                    "answer": answer,
                    "reward": reward,
                    "reward_config_hash": "rc1",
                    "eligible_as": "train" if j == 0 else "rejected_only",
                    "window": WINDOW,
                }
            )
    golden = {
        "trace_id": "gold",
        "prompt_group": "gold",
        "question": domain.load_golden()[0].question,
    }
    rows.append({**rows[0], **golden})
    return select(
        rows,
        min_margin=0.2,
        contaminated=GoldenFilter.from_settings(get_settings().reward),
        snapshot_id=123456789,
        windows=[WINDOW],
    )


def _lineage(method: Method, tmp_path: Path) -> Lineage:
    pairs_sid, consent_sid = METHODS[method]
    curate = CurateSettings(
        pii_filter_version="presidio-test/v9",
        entities=["PERSON", "EMAIL_ADDRESS"],
        operator="hash",
        score_threshold=0.5,
        k_anonymity=3,
    )
    metrics = {
        "steps": 20.0,
        "first_loss": 0.693147,
        "loss": 0.41234567,
        "train_loss": 0.5,
        "train_runtime": 12.345678,
        "seconds_per_step": 0.6172839,
        "rewards/margins": 0.123456789,
        "rewards/accuracies": 0.75,
    }
    run = TrainRun(
        run_id="run-123",
        base="v0",
        base_dir=tmp_path,
        choice=MethodChoice(method=method, reason=f"requested {method}: 4 items", available=4),
        selection=_selection(),
        started=datetime(2026, 3, 2, 12, 0, tzinfo=UTC),
    )
    lineage = build_lineage(
        run,
        config=TrainConfig(
            method=method, max_steps=20, learning_rate=5e-5, use_lora=method == "rft"
        ),
        pairs_snapshot_id=pairs_sid,
        consent_snapshot_id=consent_sid,
        outcome=TrainOutcome(
            method=method,
            output_dir=tmp_path,
            steps=20,
            metrics=metrics,
            wall_s=13.456,
            hardware="x86_64 CPU, 1 threads",
        ),
        evaluation=Evaluation(
            golden_items=200, base_accuracy=0.46, accuracy=0.865, decoding="greedy"
        ),
        settings=Settings(home=tmp_path / "home", curate=curate),
    )
    finished = datetime.fromisoformat(FINISHED)
    return lineage.model_copy(update={"version": "v1", "finished_at": finished})


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_new_run_writes_the_same_files_as_before(method: Method, tmp_path: Path) -> None:
    lineage = _lineage(method, tmp_path)

    files = lineage_files(lineage)

    assert files[LINEAGE] == (DATA / f"lineage_{method}.json").read_text()
    assert files[CARD] == (DATA / f"model_card_{method}.yaml").read_text()
    assert card_markdown(lineage) + "\n" == (DATA / f"summary_{method}.md").read_text()


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_lineage_json_written_before_parses_and_saves_unchanged(method: Method) -> None:
    text = (DATA / f"lineage_{method}.json").read_text()

    lineage = Lineage.model_validate_json(text)

    assert lineage_files(lineage)[LINEAGE] == text
    assert lineage.data.training_examples.snapshot_ids == [123456789]
    assert lineage.data.pairs_snapshot_id == METHODS[method][0]
    card = yaml.safe_load((DATA / f"model_card_{method}.yaml").read_text())
    assert model_card(lineage) == card
    assert card_markdown(lineage) + "\n" == (DATA / f"summary_{method}.md").read_text()


def test_a_lineage_json_with_an_unknown_field_is_refused() -> None:
    raw = json.loads((DATA / "lineage_dpo.json").read_text())
    raw["data"]["surprise"] = 1

    with pytest.raises(ValueError, match="surprise"):
        Lineage.model_validate(raw)


@pytest.mark.parametrize(
    ("raw", "user_keys"),
    [
        ({"version": "v0", "method": "bootstrap-sft", "golden_accuracy": 0.4}, None),
        ({"user_keys": ["k"]}, None),
        ({"data": {"training_examples": {}, "user_keys": ["k"]}}, None),
        ({"data": {"training_examples": {"snapshot_ids": [1], "trace_ids": ["t"]}}}, []),
        (json.loads((DATA / "lineage_rft.json").read_text()), ["key-0", "key-1", "key-2"]),
    ],
)
def test_the_user_view_reads_any_versions_lineage(
    raw: dict[str, Any], user_keys: list[str] | None
) -> None:
    """Bootstrap and partial files carry no trained rows; a train run's file does."""
    view = LineageView.model_validate(raw)

    trained = view.data is not None and view.data.training_examples is not None
    assert trained == (user_keys is not None)
    if view.data is not None and user_keys is not None:
        assert view.data.user_keys == user_keys


def test_an_adapter_names_its_base_in_lineage_and_card(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text("{}")
    (tmp_path / "base_model.json").write_text('{"version": "v0"}')
    lineage = _lineage("rft", tmp_path)  # outcome.output_dir is tmp_path: an adapter

    files = lineage_files(lineage)

    assert json.loads(files[LINEAGE])["base_model"] == "v0"
    card = yaml.safe_load(files[CARD])
    assert card["artifact"] == "lora-adapter" and card["base_model"] == "v0"
    assert "LoRA adapter on | v0" in card_markdown(lineage)
    assert Lineage.model_validate_json(files[LINEAGE]) == lineage
