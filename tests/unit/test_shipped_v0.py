"""The shipped v0 (``tasks/demo/shipped_v0``): the default configuration's base model, which
``make run`` and the tests register instead of pre-training it for minutes. It must be the
build the code asks for: after a recipe change (``CODE_VERSION``) or a new default, this fails
until ``make v0`` rebuilds it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.serving import models
from infra.settings import Settings
from infra.store import LocalStore
from tasks.demo import bootstrap
from tasks.demo.pretrain import BootstrapConfig
from tasks.demo.workloads import of_settings


def _default_key(settings: Settings) -> str:
    config = BootstrapConfig.for_profile(settings.profile, of_settings(settings))
    return bootstrap.input_hash(config, 0, settings.base_model_path)


def test_the_shipped_build_is_the_default_configurations(tmp_path: Path) -> None:
    key = _default_key(Settings(home=tmp_path / "home"))
    assert sorted(p.name for p in bootstrap.SHIPPED.iterdir()) == [key], "run make v0"
    result = json.loads((bootstrap.SHIPPED / key / "result.json").read_text())
    assert result["input_hash"] == key and result["source"] == "trained"
    # the loop needs room to improve on each workload
    for accuracy in result["golden_accuracy_by_workload"].values():
        assert 0.2 <= accuracy <= 0.75


def test_a_fresh_home_registers_the_shipped_v0_without_pretraining(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_training(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the shipped build must be used")

    monkeypatch.setattr(bootstrap, "pretrain", no_training)
    settings = Settings(home=tmp_path / "home")
    store = LocalStore(settings.resolved_store_url)
    result = bootstrap.bootstrap_base_model(store, settings=settings)
    key = _default_key(settings)
    assert result.input_hash == key and models.list_versions(store) == ["v0"]
    shipped = bootstrap.SHIPPED / key / "model" / "model.safetensors"
    assert (result.model_dir / "model.safetensors").read_bytes() == shipped.read_bytes()
    # force: built from scratch, never the shipped copy
    with pytest.raises(AssertionError, match="shipped build must be used"):
        bootstrap.bootstrap_base_model(store, settings=settings, force=True)


def test_the_judge_tests_shipped_small_v0_is_the_one_it_asks_for() -> None:
    """The exploitable-judge test's hedging v0 ships in tests/data/shipped_v0; a recipe change
    that changes its input hash fails here (not in a slower test run) until it is shipped again."""
    from tests.e2e.test_exploitable_judge import SHIPPED_SMALL, small_config

    key = bootstrap.input_hash(small_config(), 0, None)
    shipped = sorted(p.name for p in SHIPPED_SMALL.iterdir())
    assert shipped == [key], "run python -m tests.prebuild_bootstrap --ship"
    result = json.loads((SHIPPED_SMALL / key / "result.json").read_text())
    assert result["input_hash"] == key and result["source"] == "trained"
    assert result["config"]["hedge_share"] == small_config().hedge_share
