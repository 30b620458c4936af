"""Large checkpoints: model files are uploaded as multipart objects streamed from disk and
downloaded back to disk, never held whole in memory (S3 and MinIO refuse one PUT over 5 GiB).

The big-object tests publish from a child process so its peak resident memory
(``VmHWM``) is the publisher's alone. The 6 GiB case (``FLYWHEEL_TEST_S3RVER_OBJECT_MIB``,
6144 by default) publishes to s3rver, a Node S3 server that keeps objects as files and
assembles a completed multipart upload by streaming its parts from disk (``make s3rver``
installs it). The moto-backed test (``FLYWHEEL_TEST_BIG_OBJECT_MIB``, 768 MiB by default)
stays smaller: moto's server, in this process, assembles a completed multipart upload in
memory (measured: 2.2 GiB peak for 512 MiB, about four times the object).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from infra.serving import models
from infra.store import LocalStore, S3Store
from infra.store.transfer import MULTIPART_CHUNK, file_sha256, multipart_etag
from tests.procs import S3RVER_CREDS, peak_rss_mib, s3_server, s3rver_server

pytestmark = pytest.mark.integration

CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}

PUBLISH = """
import json, sys
from botocore.config import Config
from infra.serving import models
from infra.store import S3Store
endpoint, url, model_dir, key_id, secret, read_timeout = sys.argv[1:7]
store = S3Store(url, endpoint_url=endpoint, access_key_id=key_id, secret_access_key=secret)
if read_timeout:  # s3rver answers CompleteMultipartUpload only once the object is assembled
    import boto3
    store._client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=key_id, aws_secret_access_key=secret,
        config=store._client.meta.config.merge(Config(read_timeout=float(read_timeout))))
def peak_kib():  # this process's own high-water mark: ru_maxrss would carry over the
    # forking parent's (pytest's, grown by moto's in-memory multipart assembly)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
before = peak_kib()
keys = models.publish_model_dir(store, "v0", model_dir)
after = peak_kib()
print(json.dumps({"keys": keys, "peak_before_kib": before, "peak_kib": after}))
"""


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with s3_server("models") as url:
        yield url


def _client(endpoint: str):  # type: ignore[no-untyped-def]
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **CREDS)


def _sparse(path: Path, size: int, markers: dict[int, bytes]) -> None:
    """A sparse file of ``size`` bytes (zeros) with ``markers`` written at their offsets, so
    the parts differ and their order shows in the ETag."""
    with path.open("wb") as fh:
        fh.truncate(size)
        for offset, data in markers.items():
            fh.seek(offset)
            fh.write(data)


BIG_MIB = int(os.environ.get("FLYWHEEL_TEST_BIG_OBJECT_MIB", "768"))


def _big_model_dir(tmp_path: Path, size: int) -> tuple[Path, dict[int, bytes]]:
    """A model directory whose weights file is ``size`` sparse bytes with random markers (at
    the start, across the first part boundary, the middle, the end)."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    markers = {
        0: os.urandom(4096),
        MULTIPART_CHUNK - 100: os.urandom(4096),
        size // 2: os.urandom(4096),
        size - 4096: os.urandom(4096),
    }
    _sparse(model_dir / "model-00001-of-00001.safetensors", size, markers)
    (model_dir / "config.json").write_text('{"model_type": "llama"}')
    return model_dir, markers


def _publish_in_child(
    endpoint: str, url: str, model_dir: Path, creds: dict[str, str], read_timeout: str = ""
) -> dict[str, Any]:
    """Publish ``model_dir`` as version ``v0`` from a child process; its report (keys, peak
    resident memory). ``read_timeout`` (seconds) replaces botocore's 60 s when given."""
    root = Path(__file__).resolve().parents[2]
    args = [endpoint, url, str(model_dir), creds["access_key_id"], creds["secret_access_key"]]
    args.append(read_timeout)
    done = subprocess.run(
        [sys.executable, "-c", PUBLISH, *args],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.slow
def test_a_big_checkpoint_publishes_with_bounded_memory(endpoint: str, tmp_path: Path) -> None:
    size = BIG_MIB * 1024 * 1024
    model_dir, _ = _big_model_dir(tmp_path, size)
    weights = model_dir / "model-00001-of-00001.safetensors"
    report = _publish_in_child(endpoint, "s3://models/big", model_dir, _store_creds())
    # the whole publishing process (python, boto3) stays far below the file: parts are read
    # from disk as they are sent, at most MAX_CONCURRENCY at a time
    peak_mib = report["peak_kib"] / 1024
    assert peak_mib < min(BIG_MIB / 3, 400), f"publisher peaked at {peak_mib:.0f} MiB"

    head = _client(endpoint).head_object(Bucket="models", Key=f"big/{weights_key(weights)}")
    assert head["ContentLength"] == size
    etag = head["ETag"].strip('"')
    assert etag.endswith(f"-{-(-size // MULTIPART_CHUNK)}")  # a multipart object
    assert etag == multipart_etag(weights)  # the same bytes in the same order
    store = S3Store("s3://models/big", endpoint_url=endpoint, **_store_creds())
    assert models.list_versions(store) == ["v0"]
    manifest = json.loads(store.get("models/v0/_COMPLETE"))
    assert set(manifest["files"]) == {"config.json", weights.name}


def weights_key(path: Path) -> str:
    return f"models/v0/{path.name}"


def _store_creds() -> dict[str, str]:
    return {"access_key_id": "testing", "secret_access_key": "testing"}


def test_a_multipart_version_fetches_back_streamed(endpoint: str, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    weights = model_dir / "model.safetensors"
    weights.write_bytes(os.urandom(MULTIPART_CHUNK + 12345))  # two parts
    (model_dir / "config.json").write_text("{}")
    store = S3Store("s3://models/small", endpoint_url=endpoint, **_store_creds())
    models.publish_model_dir(store, "v0", model_dir)
    head = _client(endpoint).head_object(Bucket="models", Key="small/models/v0/model.safetensors")
    assert head["ETag"].strip('"').endswith("-2")

    fetched = models.fetch_model(store, "v0", tmp_path / "cache")
    assert file_sha256(fetched / "model.safetensors") == file_sha256(weights)
    assert (fetched / "config.json").read_text() == "{}"


def test_a_corrupted_object_is_refused_on_fetch(endpoint: str, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "model.safetensors").write_bytes(b"weights")
    store = S3Store("s3://models/corrupt", endpoint_url=endpoint, **_store_creds())
    models.publish_model_dir(store, "v0", model_dir)
    store.put("models/v0/model.safetensors", b"tampered")
    with pytest.raises(Exception, match="does not match its recorded hash"):
        models.fetch_model(store, "v0", tmp_path / "cache")
    assert not (tmp_path / "cache" / "v0").exists()


def test_local_store_files_round_trip(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    source = tmp_path / "w.bin"
    source.write_bytes(os.urandom(3 * 1024 * 1024 + 7))
    store.put_file("models/v0/w.bin", source)
    store.get_file("models/v0/w.bin", tmp_path / "out" / "w.bin")
    assert (tmp_path / "out" / "w.bin").read_bytes() == source.read_bytes()
    assert store.list("models/") == ["models/v0/w.bin"]  # no temporary file left behind


S3RVER_MIB = int(os.environ.get("FLYWHEEL_TEST_S3RVER_OBJECT_MIB", "6144"))


def _file_md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        while block := fh.read(8 * 1024 * 1024):
            digest.update(block)
    return digest.hexdigest()


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_6_gib_checkpoint_publishes_to_a_disk_backed_s3_server(tmp_path: Path) -> None:
    """The 6 GiB case against s3rver, which stores parts and objects as files and assembles a
    completed multipart upload by streaming its parts from disk, so neither side holds it."""
    size = S3RVER_MIB * 1024 * 1024
    # s3rver keeps the parts until the assembled object is written: twice the object on disk
    # at the peak. Short of that it dies mid-upload and the publisher sees only a refused
    # connection (this machine's disk is shared with whatever else runs on it)
    need, free = 2 * size + 2**30, shutil.disk_usage(tmp_path).free
    assert free >= need, (
        f"{S3RVER_MIB} MiB to s3rver needs {need / 2**30:.1f} GiB free under {tmp_path}, "
        f"has {free / 2**30:.1f} GiB: free disk or set FLYWHEEL_TEST_S3RVER_OBJECT_MIB"
    )
    model_dir, markers = _big_model_dir(tmp_path, size)
    weights = model_dir / "model-00001-of-00001.safetensors"
    started = time.monotonic()
    with s3rver_server(tmp_path, "models") as server:
        # s3rver assembles the object (6 GiB read, hashed, written) before it answers
        # CompleteMultipartUpload, sending nothing meanwhile (S3 and MinIO send keep-alive
        # whitespace): that outlasts botocore's 60 s read timeout here, and the retry then
        # fails because the upload is already complete
        try:
            report = _publish_in_child(
                server.endpoint, "s3://models/big", model_dir, S3RVER_CREDS, read_timeout="900"
            )
        except AssertionError as exc:  # what the server said, and the disk, beside the client
            log = server.log.read_text(errors="replace")[-2000:]
            free_gib = shutil.disk_usage(tmp_path).free / 2**30
            raise AssertionError(
                f"{exc}\n--- s3rver log ({free_gib:.1f} GiB free) ---\n{log}"
            ) from None
        publish_s = time.monotonic() - started
        # the publisher (python, boto3) stays bounded: parts are read from disk as they are sent
        peak_mib = report["peak_kib"] / 1024
        assert peak_mib < 400, f"publisher peaked at {peak_mib:.0f} MiB"
        server_mib = peak_rss_mib(server.pid)  # reported, not asserted: not our code
        print(
            f"\n{S3RVER_MIB} MiB to s3rver in {publish_s:.0f} s; peak RSS: publisher "
            f"{peak_mib:.0f} MiB, s3rver {server_mib:.0f} MiB; load {os.getloadavg()[0]:.1f}"
        )

        client = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id=S3RVER_CREDS["access_key_id"],
            aws_secret_access_key=S3RVER_CREDS["secret_access_key"],
        )
        key = f"big/{weights_key(weights)}"
        head = client.head_object(Bucket="models", Key=key)
        assert head["ContentLength"] == size
        # uploaded as one part per MULTIPART_CHUNK, each numbered once (s3rver's request log;
        # s3rver gives a completed multipart object the MD5 of its bytes, not S3's "-N" ETag)
        parts = -(-size // MULTIPART_CHUNK)
        logged = re.findall(r'Stored part (\d+) of \w+ in bucket "models"', server.log.read_text())
        assert sorted(int(n) for n in logged) == list(range(1, parts + 1))
        assert head["ETag"].strip('"') == _file_md5(weights)  # the same bytes, same order
        for offset, data in markers.items():
            got = client.get_object(
                Bucket="models", Key=key, Range=f"bytes={offset}-{offset + len(data) - 1}"
            )["Body"].read()
            assert got == data, f"marker at {offset} did not land"
        store = S3Store("s3://models/big", endpoint_url=server.endpoint, **S3RVER_CREDS)
        assert models.list_versions(store) == ["v0"]
        manifest = json.loads(store.get("models/v0/_COMPLETE"))
        assert set(manifest["files"]) == {"config.json", weights.name}
