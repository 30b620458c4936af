"""The local-directory object store (the embedded default).

Writes go to a temporary file renamed into place; a conditional write (:meth:`LocalStore.put_if`)
holds an exclusive ``flock`` on a lock file beside the object around read-compare-rename.
"""

from __future__ import annotations

import builtins
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from infra.errors import ObjectNotFound, PreconditionFailed, StoreError
from infra.faults import kill_point
from infra.store.base import check_key
from infra.store.transfer import copy_atomic

_LOCK_PREFIX = ".lock-"


class LocalStore:
    """A directory on the local file system (the embedded default)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.url = str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` as ``key`` (a temporary file renamed into place)."""
        kill_point("store.put", key)
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise StoreError(f"cannot write {key}: {exc.strerror}") from exc

    def get(self, key: str) -> bytes:
        """The object's bytes (raises ``ObjectNotFound`` when the key does not exist)."""
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc
        except OSError as exc:
            raise StoreError(f"cannot read {key}: {exc.strerror}") from exc

    def put_file(self, key: str, path: Path) -> None:
        """Copy the file at ``path`` into ``key`` (streamed, atomic)."""
        kill_point("store.put", key)
        try:
            copy_atomic(path, self._path(key))
        except OSError as exc:
            raise StoreError(f"cannot write {key}: {exc.strerror}") from exc

    def get_file(self, key: str, path: Path) -> None:
        """Copy ``key`` into the file ``path`` (streamed, atomic).

        Raises:
            ObjectNotFound: the key does not exist.
        """
        if not self.exists(key):
            raise ObjectNotFound(key)
        try:
            copy_atomic(self._path(key), path)
        except OSError as exc:
            raise StoreError(f"cannot read {key}: {exc.strerror}") from exc

    def exists(self, key: str) -> bool:
        """Whether ``key`` exists."""
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> list[str]:
        """Keys under ``prefix``, sorted (temporary and lock files left out)."""
        base = self.root / check_key(prefix, prefix=True) if prefix else self.root
        start = base if base.is_dir() else base.parent
        if not start.exists():
            return []
        keys = []
        for path in _walk(start):
            key = path.relative_to(self.root).as_posix()
            if key.startswith(prefix) and not path.name.startswith((".tmp-", _LOCK_PREFIX)):
                keys.append(key)
        return sorted(keys)

    def delete(self, key: str) -> None:
        """Remove ``key`` (nothing when it does not exist)."""
        self._path(key).unlink(missing_ok=True)

    def list_modified(self, prefix: str = "") -> builtins.list[tuple[str, datetime]]:
        """Keys under ``prefix`` with their last-modified time (UTC)."""
        out = []
        for key in self.list(prefix):
            try:
                mtime = self._path(key).stat().st_mtime
            except FileNotFoundError:
                continue
            out.append((key, datetime.fromtimestamp(mtime, UTC)))
        return out

    def get_versioned(self, key: str) -> tuple[bytes, str]:
        """The object and its ETag (the MD5 of its bytes, as S3 computes it for a single PUT).

        Raises:
            ObjectNotFound: the key does not exist.
        """
        data = self.get(key)
        return data, _etag(data)

    def put_if(self, key: str, data: bytes, *, etag: str | None) -> str:
        """Write ``data`` only if the object's ETag is still ``etag`` (``None``: only if it does
        not exist); returns the new ETag. The check and the rename happen under an exclusive
        lock on ``.lock-<name>`` beside the object, so two writers never both succeed.

        Raises:
            PreconditionFailed: the object changed (or appeared) since ``etag`` was read.
        """
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = path.with_name(_LOCK_PREFIX + path.name)
        with open(lock, "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                current = _etag(path.read_bytes()) if path.is_file() else None
                if current != etag:
                    raise PreconditionFailed(f"{key} changed (etag {current}, expected {etag})")
                self.put(key, data)
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return _etag(data)


def _etag(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            yield Path(dirpath) / name
