"""``FLYWHEEL_BOOTSTRAP_CACHE_DIR``: several homes share one build cache of v0 (keyed by the
bootstrap's input hash), so a second home registers the same v0 without pre-training it again;
without the setting a home keeps its builds under ``$FLYWHEEL_HOME/cache/bootstrap``; two
processes bootstrapping the same inputs at once pre-train it once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from infra.serving import models
from infra.settings import Settings
from infra.store import LocalStore
from tasks.demo import bootstrap
from tasks.demo.bootstrap import bootstrap_base_model
from tasks.demo.pretrain import BootstrapConfig

pytestmark = pytest.mark.integration

TINY = BootstrapConfig(n_layer=1, n_embd=32, n_head=2, n_positions=64, steps=3, batch_size=8)


def builds(cache: Path) -> list[str]:
    """The entries of a build cache, less the lock file kept beside each build."""
    return sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock"))


def _home(path: Path, **kw: Any) -> tuple[Settings, LocalStore]:
    settings = Settings(home=path, **kw)
    return settings, LocalStore(settings.resolved_store_url)


def test_a_second_home_reuses_the_shared_build_without_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    settings, store = _home(tmp_path / "a", bootstrap_cache_dir=shared)
    first = bootstrap_base_model(store, settings=settings, config=TINY)
    assert builds(shared) == [first.input_hash]  # no partial build
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
    assert builds(built) == [result.input_hash]
    assert (built / result.input_hash / "model" / "model.safetensors").is_file()


# a process that imports, says it is ready, waits for "go", then bootstraps into a shared cache
AT_ONCE = """
import sys, time
from pathlib import Path
from infra.settings import Settings
from infra.store import LocalStore
from tasks.demo.bootstrap import bootstrap_base_model
from tasks.demo.pretrain import BootstrapConfig
home, shared, ready, go = (Path(a) for a in sys.argv[1:5])
settings = Settings(home=home, bootstrap_cache_dir=shared)
config = BootstrapConfig(n_layer=1, n_embd=32, n_head=2, n_positions=64, steps=40, batch_size=8,
                         min_steps=40)
ready.touch()
while not go.exists():
    time.sleep(0.01)
bootstrap_base_model(LocalStore(settings.resolved_store_url), settings=settings, config=config)
"""


def test_two_processes_bootstrapping_the_same_inputs_at_once_pretrain_it_once(
    tmp_path: Path,
) -> None:
    shared, go = tmp_path / "shared", tmp_path / "go"
    root = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                AT_ONCE,
                str(tmp_path / name),
                str(shared),
                str(tmp_path / f"{name}.ready"),
                str(go),
            ],
            cwd=root,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"{n}.ready").exists() for n in ("a", "b")):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.05)
    go.touch()  # both start bootstrapping together: without a lock both would pre-train
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    lineages = [
        models.read_model_json(
            LocalStore(Settings(home=tmp_path / n).resolved_store_url), "v0", "lineage.json"
        )
        for n in ("a", "b")
    ]
    # one build registered in both homes (a second build would carry its own timestamp)
    assert lineages[0]["created_at"] == lineages[1]["created_at"]
    assert lineages[0]["steps"] == 40
    assert len(builds(shared)) == 1  # the build, and no partial one left behind
