"""Model versions in the object store: ``models/<version>/`` (weights, tokenizer, model card).

A version becomes visible only when its ``_COMPLETE`` marker exists; the marker is written
last, so a half-written version (a crash mid-upload) is never listed or fetched. Version names
are monotonic (``v0``, ``v1``, ...): :func:`next_version` follows the newest complete version,
so a complete name is never reused (a rejected version stays rejected), while the name of an
upload that died before its marker is taken again by the next publish, which first removes the
leftovers: a crashed and rerun train lists the same versions as a run that never crashed.
Publishes are serial (the ``train`` deployment runs one at a time).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.errors import ObjectNotFound, StoreError, TransientError, UnservableVersion
from infra.keys import MODELS_PREFIX, model_prefix, version_number
from infra.store.transfer import file_sha256

if TYPE_CHECKING:
    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

PREFIX = MODELS_PREFIX
COMPLETE = "_COMPLETE"
# files a release updates after publication (the card gains the gate's result and each
# deployment stage): their hash in the manifest is the published one, not checked on fetch
MUTABLE = frozenset({"model_card.yaml"})


def model_cache_root(settings: Settings) -> Path:
    """Where fetched versions live locally: ``$FLYWHEEL_HOME/cache/models``."""
    return settings.home_dir / "cache" / "models"


def _started_versions(store: ObjectStore) -> dict[str, bool]:
    """{version: complete?} for every version with at least one object."""
    seen: dict[str, bool] = {}
    for key in store.list(PREFIX):
        parts = key[len(PREFIX) :].split("/", 1)
        if len(parts) == 2 and version_number(parts[0]) >= 0:
            seen[parts[0]] = seen.get(parts[0], False) or parts[1] == COMPLETE
    return seen


_number = version_number


def list_versions(store: ObjectStore) -> list[str]:
    """Complete versions, oldest first."""
    return sorted((v for v, done in _started_versions(store).items() if done), key=_number)


def version_exists(store: ObjectStore, version: str) -> bool:
    """Whether ``version`` is complete in the store."""
    return store.exists(model_prefix(version) + COMPLETE)


@dataclass(frozen=True)
class ServableVersions:
    """Which model versions the gateway can serve: a complete version in the store (loaded in
    process), or one with an upstream configured (``FLYWHEEL_GATEWAY__UPSTREAMS``). Every
    control that routes traffic to a version checks it here before it changes anything."""

    store: ObjectStore
    upstreams: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: Settings, store: ObjectStore) -> ServableVersions:
        """The servable versions: those in ``store`` and those with a configured upstream."""
        return cls(store, frozenset(settings.gateway.upstreams))

    def servable(self, version: str) -> bool:
        """Whether ``version`` can be served.

        Raises:
            TransientError: the store could not be asked (never read as "does not exist").
        """
        if version in self.upstreams:
            return True
        try:
            return version_exists(self.store, version)
        except TransientError:
            raise
        except StoreError:  # not a version name at all (e.g. "../x")
            return False

    def known(self) -> list[str]:
        """Every servable version, oldest first (store versions by number, then upstream names)."""
        names = set(list_versions(self.store)) | self.upstreams
        return sorted(names, key=lambda v: (_number(v) < 0, _number(v), v))

    def require(self, version: str) -> None:
        """Nothing when ``version`` can be served.

        Raises:
            UnservableVersion: it cannot; the message names the versions that can.
        """
        if not self.servable(version):
            known = ", ".join(self.known()) or "none (run `flywheel bootstrap`)"
            raise UnservableVersion(f"model version {version} does not exist; versions: {known}")


def next_version(store: ObjectStore) -> str:
    """The name after the newest complete version (``v0`` in an empty store); an abandoned,
    never completed upload's name is reused (:func:`publish_model_dir` clears its files)."""
    complete = [v for v, done in _started_versions(store).items() if done]
    return f"v{max((_number(v) for v in complete), default=-1) + 1}"


def publish_model_dir(
    store: ObjectStore,
    version: str,
    local_dir: str | Path,
    *,
    extra_files: dict[str, bytes] | None = None,
    overwrite: bool = False,
) -> list[str]:
    """Upload every file of ``local_dir`` (plus ``extra_files``) as ``models/<version>/``, then
    the ``_COMPLETE`` marker. Returns the keys written.

    Raises:
        StoreError: the version is already complete and ``overwrite`` is false.
    """
    prefix = model_prefix(version)
    if version_exists(store, version):
        if not overwrite:
            raise StoreError(f"model version {version} already exists")
        store.delete(prefix + COMPLETE)  # invisible first, then replaced
    for key in store.list(prefix):  # leftovers of a crashed upload or the replaced version
        store.delete(key)
    local_dir = Path(local_dir)
    written: dict[str, str] = {}  # relative name -> sha256
    files = {
        p.relative_to(local_dir).as_posix(): p
        for p in sorted(local_dir.rglob("*"))
        if p.is_file() and not p.name.startswith(".") and p.name != COMPLETE
    }

    for rel, path in files.items():  # streamed from disk: weights can be many GiB
        written[rel] = file_sha256(path)
        store.put_file(prefix + rel, path)
    for rel, data in (extra_files or {}).items():
        store.put(prefix + rel, data)
        written[rel] = hashlib.sha256(data).hexdigest()
    manifest = {"version": version, "files": written, "published_at": time.time()}
    store.put(prefix + COMPLETE, json.dumps(manifest, sort_keys=True).encode())
    log.info("published model %s (%d files)", version, len(written))
    return [prefix + rel for rel in written]


def rewrite_published_file(store: ObjectStore, key: str, data: bytes) -> bool:
    """Replace a published file of a version (erasure: its lineage named the user's salted
    key) and record the new hash in the version's manifest, so that fetching it still
    verifies; returns False when ``key`` is not a file of a published version."""
    parts = key.split("/", 2)
    if len(parts) != 3 or f"{parts[0]}/" != MODELS_PREFIX:
        return False
    marker_key = model_prefix(parts[1]) + COMPLETE
    try:
        manifest = json.loads(store.get(marker_key))
    except ObjectNotFound:
        return False
    if parts[2] not in manifest.get("files", {}):
        return False
    store.put(key, data)
    manifest["files"][parts[2]] = hashlib.sha256(data).hexdigest()
    store.put(marker_key, json.dumps(manifest, sort_keys=True).encode())
    return True


def read_model_json(store: ObjectStore, version: str, name: str) -> dict[str, Any]:
    """A JSON file of a complete version (e.g. ``lineage.json``)."""
    return dict(json.loads(store.get(model_prefix(version) + name)))


def fetch_model(store: ObjectStore, version: str, cache_root: str | Path) -> Path:
    """A local directory holding ``version`` (downloaded once into ``cache_root/<version>``);
    for a LoRA adapter version its base version is fetched beside it
    (:func:`infra.serving.causal_lm.root_dir` finds it there).

    Raises:
        ObjectNotFound: the version (or an adapter's base) does not exist or is not complete.
    """
    from infra.serving.causal_lm import adapter_base, is_adapter

    target = _fetch_one(store, version, cache_root)
    if is_adapter(target):
        base = adapter_base(target)
        if base == version:
            raise StoreError(f"model {version}: a LoRA adapter names itself as its base")
        fetch_model(store, base, cache_root)
    return target


def manifest_path(root: Path, rel: str, *, version: str) -> Path:
    """Where a model manifest's file ``rel`` goes under ``root``. The manifest comes from the
    object store, which is not trusted to choose paths: an absolute path, ``..``, an empty or
    ``.`` part, a backslash, or anything that resolves outside ``root`` (a ``.pth`` dropped
    into site-packages runs code in every later process) is refused.

    Raises:
        StoreError: the path leaves ``root`` or is not a plain relative path.
    """
    parts = rel.split("/")
    bad = not rel or rel.startswith("/") or "\\" in rel or "\x00" in rel
    if bad or any(p in ("", ".", "..") for p in parts):
        raise StoreError(f"model {version}: manifest names an unsafe path {rel!r}")
    dest = root / rel
    if not dest.resolve().is_relative_to(root.resolve()):
        raise StoreError(f"model {version}: manifest path {rel!r} leaves the model folder")
    return dest


def _fetch_one(store: ObjectStore, version: str, cache_root: str | Path) -> Path:
    prefix = model_prefix(version)
    target = Path(cache_root) / version
    try:
        marker = store.get(prefix + COMPLETE)
    except ObjectNotFound as exc:
        raise ObjectNotFound(f"model version {version} does not exist (or is incomplete)") from exc
    if (target / COMPLETE).is_file() and (target / COMPLETE).read_bytes() == marker:
        return target
    files: dict[str, str] = json.loads(marker)["files"]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=target.parent))
    try:
        for rel, digest in files.items():  # streamed to disk, then hashed from disk
            dest = manifest_path(tmp, rel, version=version)
            dest.parent.mkdir(parents=True, exist_ok=True)
            store.get_file(prefix + rel, dest)
            if rel not in MUTABLE and file_sha256(dest) != digest:
                raise StoreError(f"model {version}: {rel} does not match its recorded hash")
        (tmp / COMPLETE).write_bytes(marker)
        if (target / COMPLETE).is_file() and (target / COMPLETE).read_bytes() == marker:
            return target  # another process fetched it meanwhile
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("fetched model %s into %s", version, target)
    return target
