"""``FLYWHEEL_BOOTSTRAP_CACHE_DIR``: several homes share one build cache of v0 (keyed by the
bootstrap's input hash), so a second home registers the same v0 without pre-training it again;
without the setting a home keeps its builds under ``$FLYWHEEL_HOME/cache/bootstrap``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra import models
from infra.settings import Settings
from infra.store import LocalStore
from tasks.demo import bootstrap
from tasks.demo.bootstrap import bootstrap_base_model
from tasks.demo.pretrain import BootstrapConfig

pytestmark = pytest.mark.integration

TINY = BootstrapConfig(n_layer=1, n_embd=32, n_head=2, n_positions=64, steps=3, batch_size=8)


def _home(path: Path, **kw: Any) -> tuple[Settings, LocalStore]:
    settings = Settings(home=path, **kw)
    return settings, LocalStore(settings.resolved_store_url)


def test_a_second_home_reuses_the_shared_build_without_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    settings, store = _home(tmp_path / "a", bootstrap_cache_dir=shared)
    first = bootstrap_base_model(store, settings=settings, config=TINY)
    assert sorted(p.name for p in shared.iterdir()) == [first.input_hash]  # no partial build
    assert not (settings.home_dir / "cache" / "bootstrap").exists()

    def no_training(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the shared build must be reused")

    monkeypatch.setattr(bootstrap, "pretrain", no_training)
    settings_b, store_b = _home(tmp_path / "b", bootstrap_cache_dir=shared)
    second = bootstrap_base_model(store_b, settings=settings_b, config=TINY)
    assert not second.cached  # registered into b's own (empty) store
    assert second.input_hash == first.input_hash
    assert second.golden_accuracy == first.golden_accuracy
    assert models.list_versions(store_b) == ["v0"]
    assert second.model_dir == settings_b.home_dir / "cache" / "models" / "v0"
    own = (second.model_dir / "model.safetensors").read_bytes()
    assert own == (first.model_dir / "model.safetensors").read_bytes()


def test_without_the_setting_a_home_keeps_its_own_build(tmp_path: Path) -> None:
    settings, store = _home(tmp_path / "home")
    result = bootstrap_base_model(store, settings=settings, config=TINY)
    built = settings.home_dir / "cache" / "bootstrap"
    assert sorted(p.name for p in built.iterdir()) == [result.input_hash]
    assert (built / result.input_hash / "model" / "model.safetensors").is_file()
