"""``flywheel train --workload W``: the train flow and the GPU recipe's ``select`` read W's rows
only (``default``: the rows recorded under no workload, or under one FLYWHEEL_WORKLOADS does
not list), the buffer's windows are the newest
holding W's rows, and the published version's lineage and model card name W; without a
workload every workload's rows are read, as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.catalog import append_rows, open_catalog, scan
from infra.errors import UnknownWorkload
from infra.keys import model_prefix
from infra.serving import models
from infra.settings import get_settings
from infra.store import open_store
from tasks.train.pairs import Selection
from tests.integration.test_train_methods import W1, W2, rows, tiny_model  # noqa: F401

pytestmark = pytest.mark.integration


def _support(window: str, n: int, **kwargs: Any) -> list[dict[str, Any]]:
    return [{**row, "workload": "support"} for row in rows(window, n, **kwargs)]


def _setenv(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    monkeypatch.setenv("FLYWHEEL_WORKLOADS", '["support"]')
    for name, value in values.items():
        monkeypatch.setenv(f"FLYWHEEL_TRAIN__{name.upper()}", value)
    get_settings.cache_clear()


def _seen_selections(monkeypatch: pytest.MonkeyPatch) -> list[Selection]:
    import flows.train

    seen: list[Selection] = []
    report_selection = flows.train.report_selection
    monkeypatch.setattr(
        flows.train,
        "report_selection",
        lambda report, sel: seen.append(sel) or report_selection(report, sel),
    )
    return seen


def test_a_workload_trains_on_its_own_rows_and_the_gpu_recipe_selects_the_same(
    flywheel_home: Path,
    prefect_api: None,
    tiny_model: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import flows.train
    from tasks.train.recipe import read_json, select

    # one window: the newest window with support's rows (W2 holds only the default's)
    _setenv(monkeypatch, buffer_days="0", buffer_windows="1", min_pairs="1000")
    settings = get_settings()
    models.publish_model_dir(open_store(settings), "v0", tiny_model)
    shared = rows(W2, 4)
    for row in shared[:4]:  # two groups curated under names that are not configured
        row["workload"] = "../x" if row["prompt_group"].endswith("-0") else "gone"
    append_rows(open_catalog(settings), "training_examples", _support(W1, 3) + shared)
    seen = _seen_selections(monkeypatch)

    support = flows.train.train(method="dpo", base_version="v0", workload="support")
    default = flows.train.train(method="dpo", base_version="v0", workload="default")
    every = flows.train.train(method="dpo", base_version="v0")
    with pytest.raises(UnknownWorkload, match="'../x' is not configured"):
        flows.train.train(method="dpo", base_version="v0", workload="../x")
    select(tmp_path / "run", base_version="v0", method="dpo", workload="support")
    recipe = read_json(tmp_path / "run" / "selection.json")

    assert (support.status, support.workload) == ("skipped", "support")
    mine, theirs, all_rows = seen
    assert mine.windows == [W1] and len(mine.pairs) == 3
    assert all(t.startswith(W1) for t in mine.pair_trace_ids)
    assert theirs.windows == [W2] and len(theirs.pairs) == 4  # "../x" and "gone" are its own
    assert all(t.startswith(W2) for t in theirs.pair_trace_ids)
    assert default.workload == "default"
    # without a workload: the newest window of every workload's rows, as before
    assert (every.workload, all_rows.workload, all_rows.windows) == (None, None, [W2])
    assert recipe["workload"] == "support"
    assert sorted(recipe["pair_trace_ids"]) == sorted(mine.pair_trace_ids)
    assert [p["pair_id"] for p in recipe["pairs"]] == [p["pair_id"] for p in mine.pairs]
    assert recipe["counts"] == mine.counts


def test_a_workloads_version_names_it_in_lineage_card_and_audit_and_is_evaluated_on_its_set(
    flywheel_home: Path,
    prefect_api: None,
    tiny_model: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.train import train

    golden = tmp_path / "support.jsonl"
    items = [
        {"item_id": "s1", "question": "What is 2+2?", "contexts": [], "reference": "4"},
        {"item_id": "s2", "question": "What is 3+4?", "contexts": [], "reference": "7"},
    ]
    golden.write_text("".join(json.dumps(item) + "\n" for item in items))
    monkeypatch.setenv("FLYWHEEL_REWARD__GOLDEN_SETS", json.dumps({"support": str(golden)}))
    _setenv(monkeypatch, buffer_days="0", min_pairs="5")
    settings = get_settings()
    store = open_store(settings)
    models.publish_model_dir(store, "v0", tiny_model)
    catalog = open_catalog(settings)
    append_rows(catalog, "training_examples", _support(W1, 6, wrong_reward=0.8) + rows(W2, 6))

    result = train(max_steps=2, workload="support")

    assert (result.status, result.version, result.workload) == ("trained", "v1", "support")
    lineage = models.read_model_json(store, "v1", "lineage.json")
    assert lineage["workload"] == "support"
    assert lineage["data"]["training_examples"]["trace_ids"] == [f"{W1}-{i}-0" for i in range(6)]
    assert lineage["evaluation"]["golden_items"] == 2  # support's golden set, not golden/
    card = yaml.safe_load(store.get(model_prefix("v1") + "model_card.yaml"))
    assert card["workload"] == "support"
    events = [e for e in scan(catalog, "audit_log").to_pylist() if e["subject"] == "v1"]
    assert json.loads(events[0]["details"])["workload"] == "support"
