"""Stage 4 pieces against real local services: pairs in the SQLite Iceberg catalog (buffer,
snapshot pinning, rerun), auto -> rft through the flow, GRPO with the stage-2 reward, LoRA."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from infra.catalog import append_rows, current_snapshot_id, open_catalog, scan
from infra.serving import models
from infra.serving.local_lm import LocalLM
from infra.settings import RewardSettings, get_settings
from infra.store import LocalStore
from tasks.demo import domain
from tasks.train.buffer import BufferScope
from tasks.train.config import TrainConfig
from tasks.train.lineage import Lineage
from tasks.train.methods import grpo_reward
from tasks.train.pairs import GoldenFilter, select_training_data, write_pairs
from tasks.train.trainer import train_model

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _dated_buffer_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """These examples carry fixed dates in the past: read them whatever their age, with the
    window buffer these tests were written for (the default buffer is now the last 7 days)."""
    from infra.settings import get_settings

    monkeypatch.setenv("FLYWHEEL_TRAIN__BUFFER_DAYS", "0")
    monkeypatch.setenv("FLYWHEEL_TRAIN__BUFFER_WINDOWS", "2")
    get_settings.cache_clear()


W1, W2, W3 = "2026-04-01T08:00:00Z", "2026-04-01T09:00:00Z", "2026-04-01T10:00:00Z"


def rows(window: str, n: int, *, wrong_reward: float = 0.1) -> list[dict[str, Any]]:
    """``n`` prompt groups of a right (0.9) and a wrong answer (``wrong_reward``)."""
    from datetime import datetime

    rng = random.Random(window)
    out = []
    for i in range(n):
        item = domain.sample_question(rng)
        for j, (answer, reward) in enumerate(((item.reference, 0.9), ("0", wrong_reward))):
            out.append(
                {
                    "trace_id": f"{window}-{i}-{j}",
                    "prompt_group": f"{window}-{i}",
                    "user_key": f"key-{i % 3}",
                    "question": item.question,
                    "contexts": item.contexts,
                    "answer": answer,
                    "reward": reward,
                    "reward_config_hash": "rc",
                    "eligible_as": "train" if reward >= 0.7 else "rejected_only",
                    "window": window,
                    "pattern": item.question,
                    "pii_entities": [],
                    "created_at": datetime.fromisoformat(window.replace("Z", "+00:00")),
                }
            )
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained 1-layer GPT-2 with the demo tokenizer: enough to exercise a trainer."""
    from tasks.demo.pretrain import BootstrapConfig, build_model, build_tokenizer

    path = tmp_path_factory.mktemp("tiny")
    tok = build_tokenizer(64)
    build_model(
        BootstrapConfig(n_layer=1, n_embd=32, n_head=2, n_positions=64), tok
    ).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_selection_reads_the_last_windows_at_one_snapshot_and_reruns_replace(
    flywheel_home: Path,
) -> None:
    catalog = open_catalog(get_settings())
    for window in (W1, W2, W3):
        append_rows(catalog, "training_examples", rows(window, 4))
    sel = select_training_data(
        catalog,
        scope=BufferScope(buffer_windows=2),
        min_margin=0.2,
        contaminated=GoldenFilter.from_settings(get_settings().reward),
    )
    assert sel.windows == [W2, W3]
    assert sel.snapshot_id == current_snapshot_id(catalog, "training_examples")
    assert len(sel.pairs) == 8 and all(p["windows"][0] in (W2, W3) for p in sel.pairs)

    write_pairs(catalog, train_run="run-a", pairs=sel.pairs)
    write_pairs(catalog, train_run="run-a", pairs=sel.pairs)  # a rerun replaces its own pairs
    sid = write_pairs(catalog, train_run="run-b", pairs=sel.pairs[:3])
    table = scan(catalog, "preference_pairs", snapshot_id=sid)
    assert sorted(table.column("train_run").to_pylist()) == ["run-a"] * 8 + ["run-b"] * 3
    run_a = [r["pair_id"] for r in table.to_pylist() if r["train_run"] == "run-a"]
    assert sorted(run_a) == sorted(p["pair_id"] for p in sel.pairs)


def test_auto_trains_rft_when_pairs_are_few_but_good_answers_many(
    flywheel_home: Path, prefect_api: None, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.train import train

    monkeypatch.setenv("FLYWHEEL_TRAIN__MIN_PAIRS", "5")
    get_settings.cache_clear()
    settings = get_settings()
    store = LocalStore(settings.resolved_store_url)
    models.publish_model_dir(store, "v0", tiny_model)
    catalog = open_catalog(settings)
    append_rows(catalog, "training_examples", rows(W1, 6, wrong_reward=0.8))  # margin 0.1

    state = train(max_steps=2, return_state=True)
    result = state.result()

    assert (result.status, result.method, result.pairs) == ("trained", "rft", 0)
    artifacts = _artifacts(state.state_details.flow_run_id)
    assert artifacts["progress"] == [100.0]  # the progress artifact reached the end
    assert "rft - auto: 0 pairs < minimum 5" in artifacts["markdown"][0]
    assert "0 pairs < minimum 5, 6 high-reward answers -> rft" in result.message
    lineage = models.read_model_json(store, "v1", "lineage.json")
    assert Lineage.model_validate(lineage) == result.lineage  # the file is the run's lineage
    assert lineage["data"]["preference_pairs"] is None
    assert lineage["data"]["training_examples"]["trace_ids"] == [f"{W1}-{i}-0" for i in range(6)]
    assert LocalLM.load(models.fetch_model(store, "v1", flywheel_home / "cache")).num_parameters


def _artifacts(flow_run_id: Any) -> dict[str, list[Any]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    flt = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=flt)
    by_type: dict[str, list[Any]] = {}
    for artifact in found:
        by_type.setdefault(str(artifact.type), []).append(artifact.data)
    return by_type


def test_user_lineage_falls_back_to_lineage_json_once_the_snapshot_is_expired(
    flywheel_home: Path, tiny_model: Path
) -> None:
    import json
    import shutil

    from infra.privacy import user_key
    from tasks.train.user_lineage import lineage_for_user

    settings = get_settings()
    store = LocalStore(settings.resolved_store_url)
    staged = flywheel_home / "v1"
    shutil.copytree(tiny_model, staged)
    data = {
        "training_examples": {"snapshot_ids": [4242], "trace_ids": ["t1"]},
        "user_keys": [user_key("erin", settings.salt())],
    }
    (staged / "lineage.json").write_text(json.dumps({"data": data}))
    models.publish_model_dir(store, "v0", tiny_model)  # bootstrap: no user data
    models.publish_model_dir(store, "v1", staged)

    assert lineage_for_user("erin").evidence == {"v1": "lineage.json"}
    assert lineage_for_user("frank").versions == []


def test_grpo_rewards_completions_with_the_stage2_reward(tiny_model: Path, tmp_path: Path) -> None:
    reward = grpo_reward(RewardSettings())
    question, ctx = "Hi <PERSON>. What is 23+58?", ["calculator: 23 + 58 = 81"]
    scores = reward(
        prompts=["p"] * 3,
        completions=[" 81", " 82", " 81\nQ: more"],
        question=[question] * 3,
        contexts=[ctx] * 3,
    )
    assert scores == [1.0, 0.0, 1.0]

    data = {
        "prompts": [
            {
                "prompt": f"Q: What is {a}+{b}?\nA:",
                "question": f"What is {a}+{b}?",
                "contexts": [domain.calculator_context(a, b)],
            }
            for a, b in domain.training_pairs()[:8]
        ]
    }
    config = TrainConfig(method="grpo", max_steps=2, batch_size=8, logging_steps=1)
    outcome = train_model(tiny_model, tmp_path / "grpo", config=config, data=data)
    assert outcome.steps == 2 and 0.0 <= outcome.metrics["reward"] <= 1.0
    assert LocalLM.load(outcome.output_dir).generate("Q: What is 1+2?\nA:").tokens_in > 0


def test_lora_checkpoint_is_merged_into_a_plain_model(tiny_model: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    catalog_rows = rows(W1, 8)
    from tasks.train.pairs import GoldenFilter, select

    sel = select(
        catalog_rows, min_margin=0.2, contaminated=GoldenFilter.from_settings(get_settings().reward)
    )
    config = TrainConfig(
        method="dpo",
        max_steps=3,
        batch_size=8,
        use_lora=True,
        lora_output="merged",
        learning_rate=1e-2,
    )
    outcome = train_model(tiny_model, tmp_path / "lora", config=config, data={"pairs": sel.pairs})
    files = {p.name for p in outcome.output_dir.iterdir()}
    assert "adapter_config.json" not in files and "model.safetensors" in files
    base, tuned = (
        load_file(str(d / "model.safetensors")) for d in (tiny_model, outcome.output_dir)
    )
    assert base.keys() == tuned.keys()  # same architecture, adapters folded in
    changed = [k for k in base if not (base[k] == tuned[k]).all()]
    assert changed and all("c_attn" in k for k in changed)
    assert config.hyperparameters()["lora_target_modules"] is None  # -> c_attn for GPT-2
