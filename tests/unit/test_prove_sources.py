"""Where flywheel prove starts: the demo's questions and v0 by default (loaded by name, the same
as before), or a model version of the store given with ``--base``."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from infra.serving import models
from infra.settings import RewardSettings, Settings
from infra.store import open_store
from tasks.prove.sources import base_model, sample_questions


def test_by_default_the_traffic_asks_the_demo_questions_it_always_asked() -> None:
    from tasks.demo.domain import sample_question

    rng = random.Random(3)
    before = [sample_question(rng) for _ in range(25)]
    assert sample_questions(RewardSettings(), 25, seed=3) == before


def test_a_sampler_that_returns_no_question_is_named(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="string or an object with .question, not int"):
        sample_questions(RewardSettings(questions="builtins:id"), 1, seed=0)


def test_base_fetches_the_version_from_the_store_without_bootstrapping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasks.demo.bootstrap

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("bootstrapped although --base was given")

    monkeypatch.setattr(tasks.demo.bootstrap, "bootstrap_base_model", refuse)
    settings = Settings(home=tmp_path)
    store = open_store(settings)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"model_type": "gpt2"}')
    models.publish_model_dir(store, "v3", tmp_path / "m")
    base = base_model(store, settings=settings, version="v3", seed=0)
    assert base.version == "v3"
    assert (base.model_dir / "config.json").read_text() == '{"model_type": "gpt2"}'


def test_without_base_the_demo_bootstrap_builds_v0_with_the_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasks.demo.bootstrap

    calls: list[int] = []

    def bootstrap(_store: Any, *, settings: Settings, seed: int) -> Any:
        calls.append(seed)
        return type("Boot", (), {"version": "v0", "model_dir": tmp_path / "v0"})()

    monkeypatch.setattr(tasks.demo.bootstrap, "bootstrap_base_model", bootstrap)
    settings = Settings(home=tmp_path)
    base = base_model(open_store(settings), settings=settings, version=None, seed=7)
    assert (base.version, base.model_dir, calls) == ("v0", tmp_path / "v0", [7])


@pytest.mark.parametrize("version", ["v7", "../v0"])
def test_prove_refuses_a_base_the_store_does_not_hold(version: str, tmp_path: Path) -> None:
    from tests.unit.test_cli_input import flywheel, one_error_line

    done = flywheel("prove", "--base", version, home=tmp_path)
    assert done.returncode == 2
    line = one_error_line(done, "flywheel prove: error: ")
    assert f"--base {version}: no such model version in the store" in line
    assert "flywheel bootstrap" in line  # the store is empty: says how to get a v0
    assert not (tmp_path / "fw" / "prove").exists()
