from __future__ import annotations

from pathlib import Path

import pytest

from infra.errors import ObjectNotFound, StoreError
from infra.serving import models
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


@pytest.mark.parametrize(
    "rel",
    [
        "/tmp/evil.pth",  # absolute: Path("/x") / "/tmp/evil.pth" is /tmp/evil.pth
        "../../../site-packages/evil.pth",
        "sub/../../evil.pth",
        "sub//evil.pth",
        "./config.json",
        "sub\\..\\evil.pth",
    ],
)
def test_a_manifest_path_from_the_store_cannot_leave_the_model_folder(
    store: LocalStore, model_dir: Path, tmp_path: Path, rel: str
) -> None:
    """Whoever can write the bucket writes the manifest too: a file list that names a path
    outside the model folder (a .pth in site-packages runs code in every later process) is
    refused before anything is written there, and nothing lands outside the cache."""
    import json

    models.publish_model_dir(store, "v0", model_dir)
    marker = json.loads(store.get("models/v0/" + models.COMPLETE))
    marker["files"][rel] = "0" * 64
    store.put("models/v0/" + models.COMPLETE, json.dumps(marker).encode())
    before = sorted(p for p in tmp_path.rglob("*") if "evil" in p.name)
    with pytest.raises(StoreError, match="unsafe path|leaves the model folder|invalid object key"):
        models.fetch_model(store, "v0", tmp_path / "cache" / "deep" / "er")
    assert sorted(p for p in Path("/tmp").glob("evil.pth")) == []
    assert sorted(p for p in tmp_path.rglob("*") if "evil" in p.name) == before
    assert not (tmp_path / "cache" / "deep" / "er" / "v0").exists()


@pytest.mark.parametrize("key", ["a//b", "/a", "a/../b", "", "a/", "models//v1/x"])
def test_an_object_key_with_an_empty_absolute_or_climbing_part_is_refused(
    store: LocalStore, key: str
) -> None:
    with pytest.raises(StoreError, match="invalid object key"):
        store.put(key, b"x")


def test_a_listing_prefix_may_end_with_a_slash_but_not_climb(store: LocalStore) -> None:
    store.put("models/v1/x", b"1")
    assert store.list("models/") == ["models/v1/x"]
    with pytest.raises(StoreError, match="invalid object key"):
        store.list("/etc/")
