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

    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` as ``key``, replacing any object there."""

    def get(self, key: str) -> bytes:
        """The object's bytes (raises ``ObjectNotFound`` when the key does not exist)."""

    def exists(self, key: str) -> bool:
        """Whether ``key`` exists."""

    def list(self, prefix: str = "") -> list[str]:
        """The keys under ``prefix``, sorted."""

    def delete(self, key: str) -> None:
        """Remove ``key`` (nothing when it does not exist)."""

    def get_versioned(self, key: str) -> tuple[bytes, str]:
        """The object and its ETag, for a later :meth:`put_if` (raises ``ObjectNotFound``)."""

    def put_if(self, key: str, data: bytes, *, etag: str | None) -> str:
        """Write ``data`` only if the object's ETag is still ``etag`` (None: only if it does not
        exist); returns the new ETag. Raises ``PreconditionFailed`` otherwise."""

    def put_file(self, key: str, path: Path) -> None:
        """Copy the file at ``path`` into ``key`` (streamed)."""

    def get_file(self, key: str, path: Path) -> None:
        """Copy ``key`` into the file ``path`` (raises ``ObjectNotFound`` when the key does not
        exist)."""


def check_key(key: str, *, prefix: bool = False) -> str:
    """``key`` unchanged when it is a relative ``/``-separated path of non-empty parts without
    ``..`` (``prefix``: a listing prefix, which may end with ``/``). An empty part (``a//b``)
    names another object on S3 than on a file system, where it collapses: refused on both.

    Raises:
        StoreError: the key is empty, absolute, has an empty part or climbs out of the store.
    """
    parts = key.split("/")
    if prefix and len(parts) > 1 and parts[-1] == "":
        parts = parts[:-1]
    if not key or key.startswith("/") or ".." in parts or "" in parts or "\x00" in key:
        raise StoreError(f"invalid object key {key!r}")
    return key
