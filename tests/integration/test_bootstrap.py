"""Bootstrap of the base model v0 with Python networking disabled (only loopback allowed)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.serving import models
from infra.serving.local_lm import LocalLM
from infra.settings import Settings
from infra.store import LocalStore
from tasks.demo import bootstrap, domain
from tasks.demo.bootstrap import bootstrap_base_model
from tasks.demo.pretrain import BootstrapConfig

pytestmark = pytest.mark.integration

TINY = BootstrapConfig(n_layer=1, n_embd=32, n_head=2, n_positions=64, steps=3, batch_size=8)


def _settings(home: Path, **kw: Any) -> tuple[Settings, LocalStore]:
    settings = Settings(home=home, **kw)
    return settings, LocalStore(settings.resolved_store_url)


def _weights(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def test_bootstrap_registers_v0_offline_and_caches(
    tmp_path: Path, no_network: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, store = _settings(tmp_path / "home")
    first = bootstrap_base_model(store, settings=settings, seed=0, config=TINY)
    assert (first.version, first.cached, first.source) == ("v0", False, "trained")
    assert models.list_versions(store) == ["v0"]
    for name in ("model.safetensors", "config.json", "tokenizer.json", "model_card.yaml"):
        assert store.exists(f"models/v0/{name}"), name
    card = yaml.safe_load(store.get("models/v0/model_card.yaml"))
    lineage = models.read_model_json(store, "v0", "lineage.json")
    assert card["evaluation"]["golden_accuracy"] == round(first.golden_accuracy, 4)
    assert lineage["input_hash"] == first.input_hash
    assert lineage["golden_items"] == len(domain.load_golden())
    assert first.model_dir == settings.home_dir / "cache" / "models" / "v0"
    lm = LocalLM.load(first.model_dir)
    assert lm.max_context == 64
    assert lm.generate("Q: What is 12+13?\nA:", max_new_tokens=4).tokens_out >= 1

    def no_training(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a cached bootstrap must not train")

    monkeypatch.setattr(bootstrap, "pretrain", no_training)
    started = time.perf_counter()
    second = bootstrap_base_model(store, settings=settings, seed=0, config=TINY)
    print(f"cached bootstrap took {time.perf_counter() - started:.3f} s")
    assert second.cached and second.input_hash == first.input_hash
    assert "already registered" in second.describe()
    assert second.golden_accuracy == first.golden_accuracy

    # the store was wiped (e.g. a fresh bucket) but the local build cache survives
    for key in store.list("models/"):
        store.delete(key)
    third = bootstrap_base_model(store, settings=settings, seed=0, config=TINY)
    assert not third.cached and models.list_versions(store) == ["v0"]


def test_bootstrap_is_deterministic_under_its_seed(tmp_path: Path, no_network: list[Any]) -> None:
    runs = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        settings, store = _settings(tmp_path / name)
        runs[name] = bootstrap_base_model(store, settings=settings, seed=seed, config=TINY)
    a, b, c = (_weights(runs[n].model_dir) for n in "abc")
    assert runs["a"].input_hash == runs["b"].input_hash != runs["c"].input_hash
    assert all((a[k] == b[k]).all() for k in a)
    assert any((a[k] != c[k]).any() for k in a)


def test_force_rebuilds_and_base_model_path_registers_instead(
    tmp_path: Path, no_network: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, store = _settings(tmp_path / "home")
    trained = bootstrap_base_model(store, settings=settings, config=TINY)
    kept = bootstrap_base_model(store, settings=settings, config=TINY, seed=5)
    assert kept.cached and kept.input_hash == trained.input_hash  # v0 is never swapped silently
    calls = []
    real = bootstrap.pretrain
    monkeypatch.setattr(bootstrap, "pretrain", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert not bootstrap_base_model(store, settings=settings, config=TINY, force=True).cached
    assert calls == [1]

    own = tmp_path / "own-model"
    own.mkdir()
    for f in trained.model_dir.iterdir():
        if f.name != models.COMPLETE:
            (own / f.name).write_bytes(f.read_bytes())
    settings2, store2 = _settings(tmp_path / "home2", base_model_path=str(own))
    registered = bootstrap_base_model(store2, settings=settings2, config=TINY)
    assert registered.source == "base_model_path" and calls == [1]
    assert models.read_model_json(store2, "v0", "lineage.json")["method"] == "registered"
