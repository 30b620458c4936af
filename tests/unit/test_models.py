from __future__ import annotations

from pathlib import Path

import pytest

from infra import models
from infra.errors import ObjectNotFound, StoreError
from infra.store import LocalStore


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "config.json").write_text('{"model_type": "gpt2"}')
    (src / "model.safetensors").write_bytes(b"\x00weights")
    (src / "sub" / "extra.txt").write_text("x")
    return src


def test_publish_then_fetch_round_trips_every_file(
    store: LocalStore, model_dir: Path, tmp_path: Path
) -> None:
    models.publish_model_dir(store, "v0", model_dir, extra_files={"model_card.yaml": b"a: 1\n"})
    assert models.list_versions(store) == ["v0"]
    local = models.fetch_model(store, "v0", tmp_path / "cache")
    assert (local / "model.safetensors").read_bytes() == b"\x00weights"
    assert (local / "sub" / "extra.txt").read_text() == "x"
    assert (local / "model_card.yaml").read_text() == "a: 1\n"
    assert models.fetch_model(store, "v0", tmp_path / "cache") == local  # cached


def test_a_half_written_version_is_invisible_and_the_rerun_publishes_it_whole(
    store: LocalStore, model_dir: Path, tmp_path: Path
) -> None:
    models.publish_model_dir(store, "v0", model_dir)
    store.put("models/v1/model.safetensors", b"partial")  # upload died before _COMPLETE
    assert models.list_versions(store) == ["v0"]
    with pytest.raises(ObjectNotFound):
        models.fetch_model(store, "v1", tmp_path / "cache")
    assert models.next_version(store) == "v1"  # a rerun lists what a clean run lists

    models.publish_model_dir(store, models.next_version(store), model_dir)
    assert models.list_versions(store) == ["v0", "v1"]
    assert store.get("models/v1/model.safetensors") != b"partial"


def test_versions_are_monotonic_and_sorted_numerically(store: LocalStore, model_dir: Path) -> None:
    assert models.next_version(store) == "v0"
    for _ in range(11):
        models.publish_model_dir(store, models.next_version(store), model_dir)
    assert models.list_versions(store)[-2:] == ["v9", "v10"]
    assert models.next_version(store) == "v11"


def test_a_complete_version_is_not_overwritten_by_accident(
    store: LocalStore, model_dir: Path, tmp_path: Path
) -> None:
    models.publish_model_dir(store, "v0", model_dir)
    with pytest.raises(StoreError, match="already exists"):
        models.publish_model_dir(store, "v0", model_dir)
    (model_dir / "model.safetensors").write_bytes(b"new")
    (model_dir / "sub" / "extra.txt").unlink()
    models.publish_model_dir(store, "v0", model_dir, overwrite=True)
    local = models.fetch_model(store, "v0", tmp_path / "cache")
    assert (local / "model.safetensors").read_bytes() == b"new"
    assert not (local / "sub" / "extra.txt").exists()
    with pytest.raises(StoreError):
        models.model_prefix("../etc")
