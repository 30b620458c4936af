"""The S3 object store (boto3; MinIO and other S3 servers through ``endpoint_url``).

Client errors are translated into the store's error family: throttling, 5xx and lost
connections become :class:`~infra.errors.TransientStoreError` (retried by the callers' retry
policy), 404 :class:`~infra.errors.ObjectNotFound`, 412/409 on a conditional write
:class:`~infra.errors.PreconditionFailed`.
"""

from __future__ import annotations

import builtins
import os
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict, TypeVar
from urllib.parse import urlparse

from infra.errors import (
    ConfigError,
    ObjectNotFound,
    PreconditionFailed,
    StoreError,
    TransientStoreError,
)
from infra.faults import kill_point
from infra.retries import STORE_RETRIES, retry_call
from infra.store.base import check_key
from infra.store.transfer import temp_beside, transfer_config

T = TypeVar("T")


class ListedObject(TypedDict, total=False):
    """One entry of a ``ListObjectsV2`` page's ``Contents`` (S3's API: ``Key``, ``LastModified``,
    ``Size``, ``ETag``, ...); the store reads the key and the time."""

    Key: str
    LastModified: datetime
    Size: int
    ETag: str


_TRANSIENT_CODES = {
    "SlowDown",
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "InternalError",
    "ServiceUnavailable",
    "Throttling",
    "ThrottlingException",
    "503",
    "500",
    "502",
    "504",
}


class S3Store:
    """An S3 bucket and prefix through boto3 (MinIO and other S3 servers via ``endpoint_url``)."""

    def __init__(
        self,
        url: str,
        *,
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
    ) -> None:
        import boto3
        from botocore.config import Config

        parsed = urlparse(url)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ConfigError(f"not an s3 URL: {url!r} (expected s3://bucket/prefix)")
        self.url = url
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self._client = boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            config=Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=30),
        )
        self.endpoint = str(self._client.meta.endpoint_url)  # named in every error

    def _key(self, key: str, *, prefix: bool = False) -> str:
        check_key(key, prefix=prefix)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _translate(self, exc: Exception, what: str) -> StoreError:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionError,
            HTTPClientError,
        )

        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in {"NoSuchKey", "404", "NotFound"}:
                return ObjectNotFound(what)
            if code in {"PreconditionFailed", "412", "ConditionalRequestConflict"}:
                return PreconditionFailed(f"{what}: {code}")
            if code in _TRANSIENT_CODES:
                return TransientStoreError(f"{what}: {code} from {self.endpoint}")
            return StoreError(f"{what}: {code} from {self.endpoint}")
        if isinstance(exc, ConnectionError | HTTPClientError):  # refused, reset, timed out
            return TransientStoreError(
                f"{what}: cannot reach the S3 endpoint {self.endpoint} ({type(exc).__name__}); "
                "check FLYWHEEL_S3_ENDPOINT_URL"
            )
        if isinstance(exc, BotoCoreError):
            return StoreError(f"{what} at {self.endpoint}: {exc}")
        return StoreError(f"{what} at {self.endpoint}: {exc}")

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` with its client errors translated, retried while they are transient (one
        policy, every retry counted as ``store.<verb>``; botocore's own retries are off)."""

        def once() -> T:
            try:
                return fn()
            except Exception as exc:
                raise self._translate(exc, what) from exc

        return retry_call(once, operation=f"store.{what.split()[0]}", policy=STORE_RETRIES)

    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` as ``key`` in one PUT."""
        kill_point("store.put", key)
        full = self._key(key)
        self._call(
            f"put {key}", lambda: self._client.put_object(Bucket=self.bucket, Key=full, Body=data)
        )

    def get(self, key: str) -> bytes:
        """The object's bytes.

        Raises:
            ObjectNotFound: the key does not exist.
        """
        full = self._key(key)
        return self._call(
            f"get {key}",
            lambda: bytes(self._client.get_object(Bucket=self.bucket, Key=full)["Body"].read()),
        )

    def put_file(self, key: str, path: Path) -> None:
        """Upload the file at ``path`` as ``key``: multipart above 64 MiB, parts read from disk
        as they are sent (memory bounded whatever the size; S3 refuses one PUT over 5 GiB)."""
        kill_point("store.put", key)
        full = self._key(key)
        self._call(
            f"put {key}",
            lambda: self._client.upload_file(
                str(path), self.bucket, full, Config=transfer_config()
            ),
        )

    def get_file(self, key: str, path: Path) -> None:
        """Download ``key`` into the file ``path`` (streamed in ranges, renamed when complete).

        Raises:
            ObjectNotFound: the key does not exist.
        """
        full = self._key(key)

        def download() -> None:
            tmp = temp_beside(path)
            try:
                self._client.download_file(self.bucket, full, str(tmp), Config=transfer_config())
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)

        self._call(f"get {key}", download)

    def exists(self, key: str) -> bool:
        """Whether ``key`` exists (a 403 on HEAD, as S3 answers without list rights, is no)."""
        full = self._key(key)
        try:
            self._call(
                f"head {key}", lambda: self._client.head_object(Bucket=self.bucket, Key=full)
            )
            return True
        except ObjectNotFound:
            return False
        except StoreError as exc:
            if "Forbidden" in str(exc) or "403" in str(exc):
                return False
            raise

    def _pages(self, prefix: str) -> builtins.list[ListedObject]:
        full = (
            self._key(prefix, prefix=True) if prefix else (f"{self.prefix}/" if self.prefix else "")
        )

        def listing() -> builtins.list[ListedObject]:
            paginator = self._client.get_paginator("list_objects_v2")
            pages = paginator.paginate(Bucket=self.bucket, Prefix=full)
            return [obj for page in pages for obj in page.get("Contents", [])]

        return self._call(f"list {prefix}", listing)

    def list(self, prefix: str = "") -> builtins.list[str]:
        """Keys under ``prefix``, sorted."""
        strip = len(self.prefix) + 1 if self.prefix else 0
        return sorted(obj["Key"][strip:] for obj in self._pages(prefix))

    def list_modified(self, prefix: str = "") -> builtins.list[tuple[str, datetime]]:
        """Keys under ``prefix`` with their last-modified time (UTC), as S3 lists them."""
        strip = len(self.prefix) + 1 if self.prefix else 0
        return sorted((o["Key"][strip:], o["LastModified"]) for o in self._pages(prefix))

    def delete(self, key: str) -> None:
        """Remove ``key`` (nothing when it does not exist)."""
        full = self._key(key)
        self._call(
            f"delete {key}", lambda: self._client.delete_object(Bucket=self.bucket, Key=full)
        )

    def get_versioned(self, key: str) -> tuple[bytes, str]:
        """The object and its ETag.

        Raises:
            ObjectNotFound: the key does not exist.
        """
        full = self._key(key)

        def read() -> tuple[bytes, str]:
            resp = self._client.get_object(Bucket=self.bucket, Key=full)
            return bytes(resp["Body"].read()), str(resp["ETag"]).strip('"')

        return self._call(f"get {key}", read)

    def put_if(self, key: str, data: bytes, *, etag: str | None) -> str:
        """Write ``data`` only if the object's ETag is still ``etag`` (``None``: only if it does
        not exist), with ``If-Match`` / ``If-None-Match: *``; returns the new ETag. AWS S3 and
        MinIO evaluate the condition atomically with the write. moto's server checks it and
        then writes without a lock, so this process also serialises its own conditional writes
        to a key (writers in other processes rely on the server alone).

        A retried attempt whose predecessor failed after the server applied it (the answer
        was lost) meets its own write: when the object now holds exactly ``data``, that is the
        success of this call, not a conflict.

        Raises:
            PreconditionFailed: the object changed (or appeared) since ``etag`` was read
                (HTTP 412, or 409 for a concurrent conditional write on AWS).
        """
        kill_point("store.put", key)
        condition = {"IfMatch": f'"{etag}"'} if etag is not None else {"IfNoneMatch": "*"}
        full = self._key(key)
        attempts = 0

        def write() -> Any:
            nonlocal attempts
            attempts += 1
            return self._client.put_object(Bucket=self.bucket, Key=full, Body=data, **condition)

        with _cas_lock(f"{self.url}/{key}"):
            try:
                resp = self._call(f"put {key}", write)
            except PreconditionFailed:
                if attempts > 1 and (mine := self._own_write(key, data)) is not None:
                    return mine
                raise
        return str(resp.get("ETag", "")).strip('"')

    def _own_write(self, key: str, data: bytes) -> str | None:
        """The object's ETag when it holds exactly ``data`` (an earlier attempt's write)."""
        try:
            current, tag = self.get_versioned(key)
        except ObjectNotFound:
            return None
        return tag if current == data else None


_CAS_LOCKS: dict[str, threading.Lock] = {}
_CAS_GUARD = threading.Lock()


def _cas_lock(name: str) -> threading.Lock:
    with _CAS_GUARD:
        return _CAS_LOCKS.setdefault(name, threading.Lock())
