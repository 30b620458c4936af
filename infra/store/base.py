"""The object store's interface: keys, the :class:`ObjectStore` protocol every backend
implements, and the key check they share."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from infra.errors import StoreError


@runtime_checkable
class ObjectStore(Protocol):
    """Keys are ``/``-separated relative paths such as ``rollouts/window=.../batch.parquet``."""

    url: str

    def put(self, key: str, data: bytes) -> None: ...
    def get(self, key: str) -> bytes: ...
    def exists(self, key: str) -> bool: ...
    def list(self, prefix: str = "") -> list[str]: ...
    def delete(self, key: str) -> None: ...
    def get_versioned(self, key: str) -> tuple[bytes, str]: ...
    def put_if(self, key: str, data: bytes, *, etag: str | None) -> str: ...
    def put_file(self, key: str, path: Path) -> None: ...
    def get_file(self, key: str, path: Path) -> None: ...


def check_key(key: str) -> str:
    """``key`` unchanged when it is a relative ``/``-separated path without ``..``.

    Raises:
        StoreError: the key is empty, absolute or climbs out of the store.
    """
    if not key or key.startswith("/") or ".." in key.split("/"):
        raise StoreError(f"invalid object key {key!r}")
    return key
