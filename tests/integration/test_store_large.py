"""Large checkpoints: model files are uploaded as multipart objects streamed from disk and
downloaded back to disk, never held whole in memory (S3 and MinIO refuse one PUT over 5 GiB).

The big-object test publishes from a child process so its peak resident memory
(``ru_maxrss``) is the publisher's alone. Its size is ``FLYWHEEL_TEST_BIG_OBJECT_MIB`` (768 MiB
by default; 6144 for the 6 GiB case): moto's server, in this process, assembles a completed
multipart upload in memory (measured: 2.2 GiB peak for 512 MiB, about four times the object),
so 6 GiB needs a machine with ~28 GiB free; the publisher's memory does not grow with the size
(measured: 61 MiB resident while uploading 6 GiB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from infra import models
from infra.store import LocalStore, S3Store
from infra.transfer import MULTIPART_CHUNK, file_sha256, multipart_etag
from tests.procs import s3_server

pytestmark = pytest.mark.integration

CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}

PUBLISH = """
import json, resource, sys
from infra import models
from infra.store import S3Store
endpoint, url, model_dir = sys.argv[1:4]
store = S3Store(url, endpoint_url=endpoint, access_key_id="testing", secret_access_key="testing")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
keys = models.publish_model_dir(store, "v0", model_dir)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"keys": keys, "maxrss_before_kib": before, "maxrss_kib": after}))
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


@pytest.mark.slow
def test_a_big_checkpoint_publishes_with_bounded_memory(endpoint: str, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    size = BIG_MIB * 1024 * 1024
    weights = model_dir / "model-00001-of-00001.safetensors"
    _sparse(
        weights,
        size,
        {
            0: os.urandom(4096),
            MULTIPART_CHUNK - 100: os.urandom(4096),
            size // 2: os.urandom(4096),
            size - 4096: os.urandom(4096),
        },
    )
    (model_dir / "config.json").write_text('{"model_type": "llama"}')
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", PUBLISH, endpoint, "s3://models/big", str(model_dir)],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # the whole publishing process (python, boto3) stays far below the file: parts are read
    # from disk as they are sent, at most MAX_CONCURRENCY at a time
    peak_mib = report["maxrss_kib"] / 1024
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
