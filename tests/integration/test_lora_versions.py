"""LoRA adapters as the unit of release: a Llama-architecture base trains a peft adapter that
is published under models/<version>/ naming its base, fetched with its base, served merged on
it, and trained on again as the next version; merged and sharded full checkpoints stay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.serving import models
from infra.serving.causal_lm import adapter_base, is_adapter
from infra.serving.local_lm import LocalLM
from infra.settings import Settings
from infra.store import LocalStore
from tasks.train.checkpoints import evaluate_golden_dirs, is_demo_model
from tasks.train.config import TrainConfig
from tasks.train.trainer import train_model

pytestmark = pytest.mark.integration

SFT = [
    {"prompt": f"Q: What is {a}+{b}?\nA:", "completion": f" {a + b}"}
    for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]
]
DATA = {"sft": SFT}


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama from a config with the demo tokenizer (nothing downloaded)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tasks.demo.pretrain import build_tokenizer

    path = tmp_path_factory.mktemp("llama")
    tok = build_tokenizer(128)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _config(**kw: object) -> TrainConfig:
    base = {"method": "rft", "max_steps": 2, "batch_size": 4, "learning_rate": 5e-2}
    return TrainConfig(**{**base, **kw})  # type: ignore[arg-type]


def _logits(lm: LocalLM, prompt: str) -> object:
    import torch

    ids = lm.tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        return lm.model(input_ids=ids).logits


def test_an_adapter_version_publishes_fetches_and_serves_on_its_base(
    llama_dir: Path, tmp_path: Path
) -> None:
    import torch

    store = LocalStore(tmp_path / "store")
    models.publish_model_dir(store, "v0", llama_dir)
    base_dir = models.fetch_model(store, "v0", tmp_path / "cache")
    assert not is_demo_model(base_dir)  # a non-demo base: LoRA unless told otherwise

    out = train_model(
        base_dir,
        tmp_path / "v1",
        config=_config(use_lora=True),
        data=DATA,
        base_version="v0",
    ).output_dir
    files = {p.name for p in out.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "base_model.json"} <= files
    assert not any(name.startswith("model") and name.endswith(".safetensors") for name in files)
    assert "README.md" not in files  # no blank peft card beside flywheel's model_card.yaml
    assert adapter_base(out) == "v0"
    targets = json.loads((out / "adapter_config.json").read_text())["target_modules"]
    assert {"q_proj", "v_proj", "down_proj"} <= set(targets)  # every linear layer, short names

    models.publish_model_dir(store, "v1", out)
    fresh = tmp_path / "fresh-cache"  # a new machine: only the store
    v1_dir = models.fetch_model(store, "v1", fresh)
    assert is_adapter(v1_dir) and (fresh / "v0" / "config.json").is_file()
    served, base = LocalLM.load(v1_dir), LocalLM.load(fresh / "v0")
    prompt = SFT[0]["prompt"]
    assert not torch.allclose(_logits(served, prompt), _logits(base, prompt))  # type: ignore[arg-type]
    evaluation = evaluate_golden_dirs(base_dir, out, settings=Settings(home=tmp_path / "home"))
    assert evaluation.golden_items > 0

    # the next version trains the same adapter on, still on v0
    out2 = train_model(
        v1_dir,
        tmp_path / "v2",
        config=_config(use_lora=True, seed=1),
        data=DATA,
        base_version="v1",
    ).output_dir
    assert adapter_base(out2) == "v0"
    models.publish_model_dir(store, "v2", out2)
    v2 = LocalLM.load(models.fetch_model(store, "v2", tmp_path / "cache2"))
    assert not torch.allclose(_logits(v2, prompt), _logits(served, prompt))  # type: ignore[arg-type]


def test_merged_and_full_checkpoints_are_saved_in_shards(llama_dir: Path, tmp_path: Path) -> None:
    out = train_model(
        llama_dir,
        tmp_path / "merged",
        config=_config(use_lora=True, lora_output="merged", max_shard_size="100KB"),
        data=DATA,
    ).output_dir
    files = {p.name for p in out.iterdir()}
    assert "adapter_config.json" not in files
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = set(index["weight_map"].values())
    assert len(shards) > 1 and shards <= files
    store = LocalStore(tmp_path / "store")
    models.publish_model_dir(store, "v0", out)
    lm = LocalLM.load(models.fetch_model(store, "v0", tmp_path / "cache"))
    assert lm.generate(SFT[0]["prompt"], max_new_tokens=2).tokens_in > 0


def test_an_adapter_without_its_base_fails_with_a_clear_reason(
    llama_dir: Path, tmp_path: Path
) -> None:
    from infra.errors import ConfigError

    out = train_model(
        llama_dir,
        tmp_path / "v1",
        config=_config(use_lora=True, max_steps=1),
        data=DATA,
        base_version="v0",
    ).output_dir
    lonely = tmp_path / "alone" / "v1"
    lonely.parent.mkdir()
    out.rename(lonely)
    with pytest.raises(ConfigError, match="base model of the LoRA adapter"):
        LocalLM.load(lonely)
