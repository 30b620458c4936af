"""Object store: one small interface (:class:`ObjectStore`), a local-directory backend
(:mod:`infra.store.local`) and an S3 backend (:mod:`infra.store.s3`), with streamed multipart
transfers for large objects (:mod:`infra.store.transfer`).

Writes are atomic: the local store writes a temporary file then renames it; S3 uses a single
PUT, or for :meth:`ObjectStore.put_file` a multipart upload streamed from disk (large model
weights; :meth:`ObjectStore.get_file` streams back to disk). Conditional writes
(:meth:`ObjectStore.put_if`, the routing state's compare-and-swap) are atomic too. Transient
failures raise :class:`~infra.errors.TransientStoreError`, a failed precondition
:class:`~infra.errors.PreconditionFailed`, everything else a plain
:class:`~infra.errors.StoreError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.errors import ConfigError
from infra.store.base import ObjectStore, check_key
from infra.store.local import LocalStore
from infra.store.s3 import S3Store

if TYPE_CHECKING:
    from infra.settings import Settings

__all__ = ["LocalStore", "ObjectStore", "S3Store", "check_key", "open_store"]


def open_store(settings: Settings) -> ObjectStore:
    """The store named by ``FLYWHEEL_STORE_URL`` (a local directory by default).

    Raises:
        ConfigError: the URL is neither a directory path nor ``file://`` nor ``s3://``.
    """
    from infra.settings import check_store_url

    url = settings.resolved_store_url
    try:
        check_store_url(url)
    except ValueError as exc:
        raise ConfigError(f"FLYWHEEL_STORE_URL: {exc}") from None
    if url.startswith("s3://"):
        return S3Store(
            url,
            endpoint_url=settings.s3_endpoint_url,
            region=settings.s3_region,
            access_key_id=_secret(settings.s3_access_key_id),
            secret_access_key=_secret(settings.s3_secret_access_key),
        )
    return LocalStore(url.removeprefix("file://"))


def _secret(value: object) -> str | None:
    get = getattr(value, "get_secret_value", None)
    return get() if get else None
