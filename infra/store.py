"""Object store: one small interface, a local-directory and an S3 (boto3) implementation.

Writes are atomic: the local store writes a temporary file then renames it; S3 uses a single
PUT, or for :meth:`ObjectStore.put_file` a multipart upload streamed from disk (large model
weights: :mod:`infra.transfer`; :meth:`ObjectStore.get_file` streams back to disk). Conditional writes (:meth:`ObjectStore.put_if`, the routing state's compare-and-swap) are
atomic too: S3 sends ``If-Match: <etag>`` / ``If-None-Match: *`` (AWS and MinIO check them
atomically); the local store holds an exclusive ``flock`` on a lock file beside the object
around read-compare-rename. Transient failures raise :class:`TransientStoreError` (retried by
the task decorators), a failed precondition :class:`PreconditionFailed`, everything else a
plain :class:`StoreError`.
"""

from __future__ import annotations

import builtins
import fcntl
import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable
from urllib.parse import urlparse

from infra.errors import (
    ConfigError,
    ObjectNotFound,
    PreconditionFailed,
    StoreError,
    TransientStoreError,
)
from infra.transfer import copy_atomic, temp_beside, transfer_config

if TYPE_CHECKING:
    from infra.settings import Settings

log = logging.getLogger(__name__)


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


_LOCK_PREFIX = ".lock-"


def _check_key(key: str) -> str:
    if not key or key.startswith("/") or ".." in key.split("/"):
        raise StoreError(f"invalid object key {key!r}")
    return key


class LocalStore:
    """A directory on the local file system (the embedded default)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.url = str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / _check_key(key)

    def put(self, key: str, data: bytes) -> None:
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
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc
        except OSError as exc:
            raise StoreError(f"cannot read {key}: {exc.strerror}") from exc

    def put_file(self, key: str, path: Path) -> None:
        """Copy the file at ``path`` into ``key`` (streamed, atomic)."""
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
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> list[str]:
        base = self.root / prefix if prefix else self.root
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
            config=Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=5),
        )
        self.endpoint = str(self._client.meta.endpoint_url)  # named in every error

    def _key(self, key: str) -> str:
        _check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _translate(self, exc: Exception, what: str) -> StoreError:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionError,
            ReadTimeoutError,
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
        if isinstance(exc, ConnectionError | ReadTimeoutError):
            return TransientStoreError(
                f"{what}: cannot reach the S3 endpoint {self.endpoint} ({type(exc).__name__}); "
                "check FLYWHEEL_S3_ENDPOINT_URL"
            )
        if isinstance(exc, BotoCoreError):
            return StoreError(f"{what} at {self.endpoint}: {exc}")
        return StoreError(f"{what} at {self.endpoint}: {exc}")

    def put(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except Exception as exc:
            raise self._translate(exc, f"put {key}") from exc

    def get(self, key: str) -> bytes:
        try:
            body = self._client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
            return bytes(body.read())
        except Exception as exc:
            raise self._translate(exc, f"get {key}") from exc

    def put_file(self, key: str, path: Path) -> None:
        """Upload the file at ``path`` as ``key``: multipart above 64 MiB, parts read from disk
        as they are sent (memory bounded whatever the size; S3 refuses one PUT over 5 GiB)."""
        try:
            self._client.upload_file(
                str(path), self.bucket, self._key(key), Config=transfer_config()
            )
        except Exception as exc:
            raise self._translate(exc, f"put {key}") from exc

    def get_file(self, key: str, path: Path) -> None:
        """Download ``key`` into the file ``path`` (streamed in ranges, renamed when complete).

        Raises:
            ObjectNotFound: the key does not exist.
        """
        tmp = temp_beside(path)
        try:
            self._client.download_file(
                self.bucket, self._key(key), str(tmp), Config=transfer_config()
            )
            os.replace(tmp, path)
        except Exception as exc:
            raise self._translate(exc, f"get {key}") from exc
        finally:
            tmp.unlink(missing_ok=True)

    def exists(self, key: str) -> bool:
        try:
            self._client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except Exception as exc:
            err = self._translate(exc, f"head {key}")
            if isinstance(err, ObjectNotFound) or "Forbidden" in str(err):
                return False
            raise err from exc

    def list(self, prefix: str = "") -> list[str]:
        full = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        strip = len(self.prefix) + 1 if self.prefix else 0
        keys: list[str] = []
        try:
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
                keys.extend(obj["Key"][strip:] for obj in page.get("Contents", []))
        except Exception as exc:
            raise self._translate(exc, f"list {prefix}") from exc
        return sorted(keys)

    def list_modified(self, prefix: str = "") -> builtins.list[tuple[str, datetime]]:
        """Keys under ``prefix`` with their last-modified time (UTC), as S3 lists them."""
        full = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        strip = len(self.prefix) + 1 if self.prefix else 0
        out: builtins.list[tuple[str, datetime]] = []
        try:
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
                out += [(o["Key"][strip:], o["LastModified"]) for o in page.get("Contents", [])]
        except Exception as exc:
            raise self._translate(exc, f"list {prefix}") from exc
        return sorted(out)

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            raise self._translate(exc, f"delete {key}") from exc

    def get_versioned(self, key: str) -> tuple[bytes, str]:
        """The object and its ETag.

        Raises:
            ObjectNotFound: the key does not exist.
        """
        try:
            resp = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
            return bytes(resp["Body"].read()), str(resp["ETag"]).strip('"')
        except Exception as exc:
            raise self._translate(exc, f"get {key}") from exc

    def put_if(self, key: str, data: bytes, *, etag: str | None) -> str:
        """Write ``data`` only if the object's ETag is still ``etag`` (``None``: only if it does
        not exist), with ``If-Match`` / ``If-None-Match: *``; returns the new ETag. AWS S3 and
        MinIO evaluate the condition atomically with the write. moto's server checks it and
        then writes without a lock, so this process also serialises its own conditional writes
        to a key (writers in other processes rely on the server alone).

        Raises:
            PreconditionFailed: the object changed (or appeared) since ``etag`` was read
                (HTTP 412, or 409 for a concurrent conditional write on AWS).
        """
        condition = {"IfMatch": f'"{etag}"'} if etag is not None else {"IfNoneMatch": "*"}
        with _cas_lock(f"{self.url}/{key}"):
            try:
                resp = self._client.put_object(
                    Bucket=self.bucket, Key=self._key(key), Body=data, **condition
                )
            except Exception as exc:
                raise self._translate(exc, f"put {key}") from exc
        return str(resp.get("ETag", "")).strip('"')


_CAS_LOCKS: dict[str, threading.Lock] = {}
_CAS_GUARD = threading.Lock()


def _cas_lock(name: str) -> threading.Lock:
    with _CAS_GUARD:
        return _CAS_LOCKS.setdefault(name, threading.Lock())


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
