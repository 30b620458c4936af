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
from datetime import datetime
from pathlib import Path
from urllib.parse import urlparse

from infra.errors import (
    ConfigError,
    ObjectNotFound,
    PreconditionFailed,
    StoreError,
    TransientStoreError,
)
from infra.faults import kill_point
from infra.store.base import check_key
from infra.store.transfer import temp_beside, transfer_config

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
        check_key(key)
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
        """Write ``data`` as ``key`` in one PUT."""
        kill_point("store.put", key)
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
        kill_point("store.put", key)
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
        kill_point("store.put", key)
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
