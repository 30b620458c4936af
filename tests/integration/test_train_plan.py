"""The ``train`` flow and the GPU recipe's ``select`` train on the same rows: both go through
``plan_training``, so every selection setting (here on-policy, which keeps only the rows the
base version answered) reaches both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.catalog import append_rows, open_catalog
from infra.serving import models
from infra.settings import get_settings
from infra.store import open_store
from tasks.train.pairs import Selection
from tests.integration.test_train_methods import W1, W2, rows, tiny_model  # noqa: F401

pytestmark = pytest.mark.integration


def _served(window: str, version: str) -> list[dict[str, Any]]:
    return [{**row, "model_version": version} for row in rows(window, 4)]


def test_the_flow_and_the_gpu_recipe_select_the_same_rows(
    flywheel_home: Path,
    prefect_api: None,
    tiny_model: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import flows.train
    from tasks.train.recipe import read_json, select

    for name, value in {
        "BUFFER_DAYS": "0",
        "BUFFER_WINDOWS": "2",
        "ON_POLICY": "true",
        "MIN_PAIRS": "1000",  # the flow stops after selecting: no training needed here
    }.items():
        monkeypatch.setenv(f"FLYWHEEL_TRAIN__{name}", value)
    get_settings.cache_clear()
    settings = get_settings()
    models.publish_model_dir(open_store(settings), "v0", tiny_model)
    catalog = open_catalog(settings)
    append_rows(catalog, "training_examples", _served(W1, "v0") + _served(W2, "v1"))

    seen: list[Selection] = []
    report_selection = flows.train.report_selection
    monkeypatch.setattr(
        flows.train,
        "report_selection",
        lambda report, sel: seen.append(sel) or report_selection(report, sel),
    )
    result = flows.train.train(method="dpo", base_version="v0")
    select(tmp_path / "run", base_version="v0", method="dpo")
    recipe = read_json(tmp_path / "run" / "selection.json")

    assert result.status == "skipped"
    flow = seen[0]
    assert sorted(flow.pair_trace_ids) == sorted(recipe["pair_trace_ids"])
    assert [p["pair_id"] for p in flow.pairs] == [p["pair_id"] for p in recipe["pairs"]]
    assert flow.counts == recipe["counts"]
    # on-policy: only the 4 prompts v0 answered, not v1's
    assert len(flow.pairs) == 4 and all(t.startswith(W1) for t in flow.pair_trace_ids)
