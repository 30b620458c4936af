"""Which base models train whole: the embedded demo GPT-2 and every whole checkpoint flywheel
trained from it (so a promoted demo candidate's successor trains whole too, cycle after cycle);
anything else trains a LoRA adapter by default."""

from __future__ import annotations

import json
from pathlib import Path

from tasks.train.checkpoints import is_demo_model


def model_dir(root: Path, name: str, *, model_type: str, lineage: dict) -> Path:
    path = root / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    (path / "lineage.json").write_text(json.dumps(lineage))
    return path


def trained_from(base: str, *, use_lora: bool) -> dict:
    return {"base_version": base, "method": "dpo", "hyperparameters": {"use_lora": use_lora}}


def test_the_bootstrapped_demo_model_and_its_whole_descendants_train_whole(tmp_path: Path) -> None:
    v0 = model_dir(tmp_path, "v0", model_type="gpt2", lineage={"source": "trained"})
    v1 = model_dir(tmp_path, "v1", model_type="gpt2", lineage=trained_from("v0", use_lora=False))
    v2 = model_dir(tmp_path, "v2", model_type="gpt2", lineage=trained_from("v1", use_lora=False))
    assert is_demo_model(v0) and is_demo_model(v1) and is_demo_model(v2)


def test_other_models_train_adapters(tmp_path: Path) -> None:
    llama = model_dir(tmp_path, "l0", model_type="llama", lineage={"source": "trained"})
    users_gpt2 = model_dir(tmp_path, "g0", model_type="gpt2", lineage={"source": "registered"})
    merged = model_dir(tmp_path, "g1", model_type="gpt2", lineage=trained_from("g0", use_lora=True))
    no_lineage = tmp_path / "bare"
    no_lineage.mkdir()
    (no_lineage / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert not any(is_demo_model(p) for p in (llama, users_gpt2, merged, no_lineage))
