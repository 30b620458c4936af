"""Streamed file transfers for the object store: large objects (model weights) go from disk to
the store and back without ever being held whole in memory.

S3 uploads use boto3's managed transfer: one ``PUT`` below :data:`MULTIPART_CHUNK`, a multipart
upload of :data:`MULTIPART_CHUNK`-sized parts above it (S3 and MinIO refuse a single ``PUT``
over 5 GiB; 10,000 parts of 64 MiB allow 640 GiB). At most :data:`MAX_CONCURRENCY` parts are in
flight, each read from the file when it is sent, so memory stays near
``MULTIPART_CHUNK * MAX_CONCURRENCY`` whatever the file's size. Downloads stream in ranges to
a temporary file beside the target, renamed into place when complete.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

MULTIPART_CHUNK = 64 * 1024 * 1024
MAX_CONCURRENCY = 4
_READ = 1024 * 1024


def transfer_config(chunk: int = MULTIPART_CHUNK) -> Any:
    """boto3's ``TransferConfig`` for :data:`MULTIPART_CHUNK` parts, bounded concurrency."""
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(
        multipart_threshold=chunk,
        multipart_chunksize=chunk,
        max_concurrency=MAX_CONCURRENCY,
        use_threads=True,
    )


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_READ):
            digest.update(block)
    return digest.hexdigest()


def multipart_etag(path: str | Path, chunk: int = MULTIPART_CHUNK) -> str:
    """The ETag S3 gives ``path`` uploaded with :func:`transfer_config` (``chunk``): the MD5 of
    the bytes for one ``PUT``, else ``md5(concat(md5(part)...))-<parts>``."""
    size = os.path.getsize(path)
    count = 1 if size < chunk else -(-size // chunk)
    parts: list[bytes] = []
    with open(path, "rb") as fh:
        for _ in range(count):
            md5 = hashlib.md5(usedforsecurity=False)
            left = chunk
            while left and (block := fh.read(min(_READ, left))):
                md5.update(block)
                left -= len(block)
            parts.append(md5.digest())
    if size < chunk:
        return parts[0].hex()
    return f"{hashlib.md5(b''.join(parts), usedforsecurity=False).hexdigest()}-{count}"


def copy_atomic(source: str | Path, dest: str | Path) -> None:
    """Copy ``source`` to ``dest`` through a temporary file beside it (streamed, then renamed:
    a reader never sees half a file)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out, _READ)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def temp_beside(dest: str | Path) -> Path:
    """A new empty temporary file in ``dest``'s directory (for a download renamed into place)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
    os.close(fd)
    return Path(tmp)
