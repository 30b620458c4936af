"""Stage 4 end to end on the demo domain: a small base model, synthetic curated traffic made
the way stages 1-3 make it (several sampled answers per prompt, verifier-scored), then the
``train`` flow: a better model, lineage that resolves by time travel, skips, user lineage."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyiceberg.expressions import EqualTo

from infra.catalog import append_rows, delete_rows, open_catalog, scan
from infra.privacy import user_key
from infra.serving import models
from infra.serving.local_lm import LocalLM, render_prompt
from infra.settings import RewardSettings, Settings, get_settings
from infra.store import LocalStore
from tasks.demo import domain
from tasks.reward import combine, support

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _dated_buffer_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """These examples carry fixed dates in the past: read them whatever their age, with the
    window buffer these tests were written for (the default buffer is now the last 7 days)."""
    from infra.settings import get_settings

    monkeypatch.setenv("FLYWHEEL_TRAIN__BUFFER_DAYS", "0")
    monkeypatch.setenv("FLYWHEEL_TRAIN__BUFFER_WINDOWS", "2")
    get_settings.cache_clear()


TEMPERATURES = (0.7, 0.9, 1.1, 1.3)
PREAMBLES = ("", "Hi, I'm <PERSON>. ", "My email is <EMAIL_ADDRESS>, thanks! ")


def synthetic_examples(
    lm: LocalLM,
    *,
    n_prompts: int,
    window: str,
    salt: str,
    seed: int = 0,
    users: list[str] | None = None,
    batch: int = 100,
) -> list[dict[str, Any]]:
    """training_examples rows as stage 3 writes them: one prompt group per non-golden
    question (with an anonymised preamble), one answer per temperature, stage-2 style reward
    (judge + faithfulness + neutral feedback), ``train`` above 0.7, else ``rejected_only``."""
    rng = random.Random(seed)
    users = users or [f"user-{i}" for i in range(20)]
    items = [domain.sample_question(rng) for _ in range(n_prompts)]
    questions = [rng.choice(PREAMBLES) + it.question for it in items]
    created = datetime.fromisoformat(window.replace("Z", "+00:00")).astimezone(UTC)
    rows: list[dict[str, Any]] = []
    for temp in TEMPERATURES:
        for start in range(0, n_prompts, batch):
            chunk = list(range(start, min(n_prompts, start + batch)))
            prompts = [render_prompt([{"role": "user", "content": questions[i]}]) for i in chunk]
            draw = seed * 100_000 + int(temp * 100) * 1000 + start  # independent samples
            gens = lm.generate_batch(prompts, temperature=temp, max_new_tokens=8, seed=draw)
            for i, gen in zip(chunk, gens, strict=True):
                rows.append(_row(items[i], questions[i], gen.text, temp, i, window, created, seed))
    for row in rows:
        uid = users[int(row["prompt_group"].rsplit("-", 1)[1]) % len(users)]
        row["user_key"] = user_key(uid, salt)
    return rows


def _row(
    item: domain.DomainItem,
    question: str,
    answer: str,
    temp: float,
    i: int,
    window: str,
    created: datetime,
    seed: int,
) -> dict[str, Any]:
    judge = domain.verify(item, answer)
    parts = {"judge": judge, "faithfulness": support(answer, item.contexts), "feedback": 0.5}
    reward = combine(parts, RewardSettings()).total
    return {
        "trace_id": f"{window}-{seed}-{i:05d}-{temp}",
        "prompt_group": f"{window}-{seed}-g-{i:05d}",
        "question": question,
        "contexts": item.contexts,
        "answer": answer,
        "reward": reward,
        "reward_judge": judge,
        "reward_config_hash": "rc-test",
        "model_version": "v0",
        "pattern": question,
        "pii_entities": [],
        "eligible_as": "train" if reward >= 0.7 else "rejected_only",
        "window": window,
        "created_at": created,
    }


@pytest.fixture(scope="module")
def base_model(tmp_path_factory: pytest.TempPathFactory, bootstrap_cache: Path) -> Iterator[Path]:
    """A small demo base model (2 x 96, about 60 % greedy golden accuracy), bootstrapped once
    for the module. One torch thread: two busy threads on two shared cores are ~10x slower."""
    import torch

    from tasks.demo.bootstrap import bootstrap_base_model
    from tasks.demo.pretrain import BootstrapConfig

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    settings = Settings(home=tmp_path_factory.mktemp("base"), bootstrap_cache_dir=bootstrap_cache)
    cfg = BootstrapConfig(n_layer=2, n_embd=96, steps=600, threads=1)
    store = LocalStore(settings.resolved_store_url)
    yield bootstrap_base_model(store, settings=settings, config=cfg).model_dir
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def untrained_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained 1-layer GPT-2: enough where only lineage and skips are under test."""
    from tasks.demo.pretrain import BootstrapConfig, build_model, build_tokenizer

    path = tmp_path_factory.mktemp("untrained")
    tok = build_tokenizer(64)
    cfg = BootstrapConfig(n_layer=1, n_embd=32, n_head=2, n_positions=64)
    build_model(cfg, tok).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _home_with_v0(home: Path, model_dir: Path) -> Path:
    """Register ``model_dir`` as v0 in the test home's store."""
    staging = home / "staging-v0"
    shutil.copytree(model_dir, staging, ignore=shutil.ignore_patterns("_COMPLETE"))
    models.publish_model_dir(LocalStore(get_settings().resolved_store_url), "v0", staging)
    return home


@pytest.fixture
def home(flywheel_home: Path, base_model: Path) -> Path:
    """A FLYWHEEL_HOME whose store holds the small pre-trained base model as v0."""
    return _home_with_v0(flywheel_home, base_model)


@pytest.fixture
def tiny_home(flywheel_home: Path, untrained_model: Path) -> Path:
    """A FLYWHEEL_HOME whose store holds an untrained model as v0."""
    return _home_with_v0(flywheel_home, untrained_model)


def _rows_for(users: dict[str, int], window: str, salt: str) -> list[dict[str, Any]]:
    """Hand-made curated rows: per user, ``n`` prompt groups with a right and a wrong answer."""
    rng = random.Random(window)
    created = datetime.fromisoformat(window.replace("Z", "+00:00"))
    rows = []
    for uid, n in users.items():
        for i in range(n):
            item = domain.sample_question(rng)
            for j, (answer, reward) in enumerate(((item.reference, 0.9), ("0", 0.1))):
                row = _row(item, item.question, answer, 1.0, i, window, created, 0)
                row.update(
                    trace_id=f"{uid}-{window}-{i}-{j}",
                    prompt_group=f"{uid}-{window}-{i}",
                    reward=reward,
                    eligible_as="train" if j == 0 else "rejected_only",
                    user_key=user_key(uid, salt),
                )
                rows.append(row)
    return rows


def _trained_ids(store: LocalStore, version: str) -> list[str]:
    lineage = models.read_model_json(store, version, "lineage.json")
    return list(lineage["data"]["training_examples"]["trace_ids"])


@pytest.mark.slow
def test_train_beats_base_and_lineage_resolves_to_the_trained_rows(
    home: Path, prefect_api: None
) -> None:
    from scipy.stats import ttest_rel

    from flows.train import train
    from tasks.demo.pretrain import evaluate_golden
    from tasks.train.lineage import Lineage, training_rows

    settings = get_settings()
    store, catalog = LocalStore(settings.resolved_store_url), open_catalog(settings)
    base = LocalLM.load(models.fetch_model(store, "v0", home / "check"))
    w1, w2 = "2026-03-02T09:00:00Z", "2026-03-02T10:00:00Z"
    rows = synthetic_examples(base, n_prompts=600, window=w1, salt=settings.salt(), seed=1)
    rows += synthetic_examples(base, n_prompts=600, window=w2, salt=settings.salt(), seed=2)
    append_rows(catalog, "training_examples", rows)

    result = train(method="auto")

    assert result.status == "trained" and result.method == "dpo", result.message
    assert result.version == "v1" and models.list_versions(store) == ["v0", "v1"]
    golden = domain.load_golden()
    base_acc, base_scores = evaluate_golden(base, golden)
    new = LocalLM.load(models.fetch_model(store, "v1", home / "check"))
    new_acc, new_scores = evaluate_golden(new, golden)
    p_value = ttest_rel(new_scores, base_scores, alternative="greater").pvalue
    print(f"golden accuracy v0 {base_acc:.3f} -> v1 {new_acc:.3f}, paired t-test p={p_value:.2g}")
    assert new_acc > base_acc and p_value < 0.05, (base_acc, new_acc, p_value)
    assert (result.golden_accuracy_base, result.golden_accuracy) == (base_acc, new_acc)

    # the snapshot ids of the card resolve, by time travel, to exactly the trained rows,
    # even after the table moved on (a new window, a forgotten user)
    lineage = models.read_model_json(store, "v1", "lineage.json")
    ids = _trained_ids(store, "v1")
    assert len(ids) == 2 * result.pairs
    append_rows(catalog, "training_examples", _rows_for({"late": 3}, "2026-03-02T11:00:00Z", "s"))
    delete_rows(catalog, "training_examples", EqualTo("trace_id", ids[0]))
    resolved = training_rows(catalog, Lineage.model_validate(lineage))
    assert sorted(resolved.column("trace_id").to_pylist()) == ids
    assert not any(domain.is_golden_question(q) for q in resolved.column("question").to_pylist())
    pairs_at = scan(
        catalog,
        "preference_pairs",
        EqualTo("train_run", result.train_run),
        snapshot_id=lineage["data"]["preference_pairs"]["snapshot_id"],
    )
    assert pairs_at.num_rows == result.pairs
    card = yaml.safe_load(store.get("models/v1/model_card.yaml"))
    assert (
        card["data_snapshots"]["training_examples"]
        == lineage["data"]["training_examples"]["snapshot_ids"]
    )
    assert card["training"]["method"] == "dpo" and card["evaluation"]["accuracy"] == new_acc
    assert lineage["privacy"]["pii_filter_version"] == settings.curate.pii_filter_version
    assert lineage["data"]["reward_config_hashes"] == ["rc-test"]
    assert lineage["metrics"]["rewards/accuracies"] > 0.5
    events = scan(catalog, "audit_log", EqualTo("event_type", "model_trained"))
    assert json.loads(events.column("details")[0].as_py())["golden_accuracy"] == [base_acc, new_acc]


def test_too_few_pairs_ends_skipped_with_the_count(tiny_home: Path, prefect_api: None) -> None:
    from flows.train import train

    settings = get_settings()
    catalog = open_catalog(settings)
    append_rows(catalog, "training_examples", _rows_for({"ann": 3}, "2026-03-03T09:00:00Z", "s"))

    result = train()

    assert result.status == "skipped"
    assert result.message == "skipped: 3 pairs < minimum 50"
    assert models.list_versions(LocalStore(settings.resolved_store_url)) == ["v0"]
    events = scan(catalog, "audit_log", EqualTo("event_type", "train_skipped"))
    assert "3 pairs < minimum 50" in events.column("details")[0].as_py()
    assert scan(catalog, "preference_pairs").num_rows == 0


def test_lineage_lists_exactly_the_versions_trained_on_a_users_data(
    tiny_home: Path, prefect_api: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.train import train
    from tasks.train.user_lineage import lineage_for_user

    monkeypatch.setenv("FLYWHEEL_TRAIN__MIN_PAIRS", "4")
    monkeypatch.setenv("FLYWHEEL_TRAIN__BUFFER_WINDOWS", "1")
    get_settings.cache_clear()
    settings = get_settings()
    catalog, salt = open_catalog(settings), settings.salt()
    w1, w2 = "2026-03-04T09:00:00Z", "2026-03-04T10:00:00Z"
    append_rows(catalog, "training_examples", _rows_for({"alice": 3, "bob": 3}, w1, salt))
    assert train(method="dpo", max_steps=2).version == "v1"
    append_rows(catalog, "training_examples", _rows_for({"carol": 4, "bob": 1}, w2, salt))
    assert train(method="dpo", max_steps=2).version == "v2"  # buffer: w2 only

    assert lineage_for_user("alice").versions == ["v1"]
    assert lineage_for_user("bob").versions == ["v1", "v2"]
    assert lineage_for_user("carol").versions == ["v2"]
    assert lineage_for_user("dave").versions == []
    # forgetting alice deletes her rows; the versions that saw them are still named
    delete_rows(catalog, "training_examples", EqualTo("user_key", user_key("alice", salt)))
    assert lineage_for_user("alice").evidence == {"v1": "time-travel"}
