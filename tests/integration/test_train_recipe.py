"""The GPU recipe on the CPU: ``select`` with the flow's data selection, ``train`` under a real
``accelerate launch`` (one process), ``publish`` with lineage; a LoRA adapter version results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.catalog import append_rows, open_catalog
from infra.serving import models
from infra.serving.local_lm import LocalLM
from infra.settings import get_settings
from infra.store import open_store
from tests.integration.test_train_methods import W1, W2, rows, tiny_model  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], home: Path) -> dict:  # type: ignore[type-arg]
    env = {**os.environ, "FLYWHEEL_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env["FLYWHEEL_TRAIN__MIN_PAIRS"] = "4"
    env["FLYWHEEL_TRAIN__BUFFER_DAYS"] = "0"  # the rows carry fixed dates in the past
    done = subprocess.run(
        args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_select_accelerate_launch_train_and_publish(
    flywheel_home: Path,
    tiny_model: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    settings = get_settings()
    store = open_store(settings)
    models.publish_model_dir(store, "v0", tiny_model)
    catalog = open_catalog(settings)
    for window in (W1, W2):
        append_rows(catalog, "training_examples", rows(window, 4))
    run = tmp_path / "run"
    py = sys.executable

    chose = _run(
        [py, "-m", "deployments.train_recipe", "select", "--run", str(run), "--method", "dpo"],
        flywheel_home,
    )
    assert chose["method"] == "dpo" and chose["available"] == 8
    selection = json.loads((run / "selection.json").read_text())
    assert selection["pairs"] and len(selection["pairs"]) == 8

    launch = [py, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "1"]
    launch += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    trained = _run(
        [
            *launch,
            "-m",
            "deployments.train_recipe",
            "train",
            "--run",
            str(run),
            "--max-steps",
            "2",
            "--batch-size",
            "4",
            "--use-lora",
            "--learning-rate",
            "0.01",
        ],
        flywheel_home,
    )
    assert trained["steps"] == 2 and "train_loss" in trained["metrics"]

    published = _run(
        [py, "-m", "deployments.train_recipe", "publish", "--run", str(run)], flywheel_home
    )
    assert published["version"] == "v1"
    lineage = models.read_model_json(store, "v1", "lineage.json")
    assert lineage["base_model"] == "v0" and lineage["base_version"] == "v0"
    assert lineage["method"] == "dpo" and lineage["hyperparameters"]["use_lora"] is True
    assert lineage["data"]["pairs"] == 8 and lineage["data"]["preference_pairs"]["pairs"] == 8
    assert lineage["data"]["training_examples"]["rows"] == 16
    lm = LocalLM.load(models.fetch_model(store, "v1", tmp_path / "cache"))
    assert lm.generate("Q: What is 1+2?\nA:", max_new_tokens=2).tokens_in > 0
