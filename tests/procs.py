"""Start real service binaries (Debian's prometheus, alertmanager, pushgateway) on loopback
for tests, and end exactly the processes we started."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

BINARIES = {
    "prometheus": ["prometheus"],
    "alertmanager": ["prometheus-alertmanager", "alertmanager"],
    "pushgateway": ["prometheus-pushgateway", "pushgateway"],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_binary(kind: str) -> str:
    for name in BINARIES[kind]:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(f"{kind} binary not installed (apt-get install {BINARIES[kind][0]}; .ci/run does)")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children that have exited (``/proc``);
    live descendants are added by :func:`tree_cpu`."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants (a multi-worker gateway, a server's
    worker processes)."""
    total = cpu_seconds(pid)
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        for child in children.read_text().split():
            with suppress(FileNotFoundError, ProcessLookupError):
                total += tree_cpu(int(child))
    return total


def wait_http(
    url: str,
    timeout: float = 30.0,
    *,
    proc: subprocess.Popen[bytes] | None = None,
    wall_cap: float = 300.0,
) -> None:
    """Wait until ``url`` answers (any status below 500). ``timeout`` is wall seconds, or, with
    the server's ``proc``, CPU seconds of that process and its children: a server that is
    starting but starved of CPU (test workers run at nice 19 beside vLLM at normal priority;
    a Prefect server once took over 180 s of wall time to come up there) is not broken, one
    that has used ``timeout`` CPU seconds without answering is, and so is one that exited.
    ``wall_cap`` bounds the wait with ``proc`` in wall seconds all the same."""
    started = time.monotonic()
    while True:
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        waited = time.monotonic() - started
        if proc is None:
            if waited >= timeout:
                raise TimeoutError(f"{url} did not come up in {timeout} s")
        else:
            if proc.poll() is not None:
                raise TimeoutError(f"{url}: the server exited ({proc.returncode}) before answering")
            try:
                used = tree_cpu(proc.pid)
            except OSError:  # it exited after poll(): the next look says so
                used = 0.0
            if used >= timeout or waited >= wall_cap:
                raise TimeoutError(
                    f"{url} did not come up: {used:.0f} CPU seconds and {waited:.0f} s of wall "
                    f"time (limits {timeout:.0f} CPU s, {wall_cap:.0f} s)"
                )
        time.sleep(0.2)


@contextmanager
def background(
    args: list[str],
    log_path: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``args`` until the block ends, then end exactly that process (by its PID)."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def service(
    args: list[str], ready_url: str, log_path: Path, *, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A :func:`background` process that is ready once ``ready_url`` answers."""
    with background(args, log_path, env=env) as proc:
        wait_http(ready_url, proc=proc)
        yield proc


@contextmanager
def pushgateway(tmp: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = [find_binary("pushgateway"), f"--web.listen-address=127.0.0.1:{port}"]
    with service(args, f"{url}/-/ready", tmp / "pushgateway.log"):
        yield url


@contextmanager
def s3_server(bucket: str) -> Iterator[str]:
    """moto's S3 server on a free loopback port with ``bucket`` created; yields its endpoint
    (credentials: ``testing`` / ``testing``)."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket=bucket)
        yield endpoint
    finally:
        server.stop()


S3RVER_DIR = Path(__file__).resolve().parents[1] / ".tools" / "s3rver"
S3RVER_BIN = S3RVER_DIR / "node_modules" / "s3rver" / "bin" / "s3rver.js"
S3RVER_CREDS = {"access_key_id": "S3RVER", "secret_access_key": "S3RVER"}


@dataclass(frozen=True)
class S3rver:
    """A running s3rver: its endpoint, PID (for its memory) and request log."""

    endpoint: str
    pid: int
    log: Path


def peak_rss_mib(pid: int) -> float:
    """The peak resident memory (``VmHWM``) of a running process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmHWM for process {pid}")


@contextmanager
def s3rver_server(tmp: Path, bucket: str) -> Iterator[S3rver]:
    """s3rver (a Node S3 server that stores objects as files and assembles a multipart upload
    by streaming its parts from disk) on a free loopback port, data under ``tmp``, with
    ``bucket`` created; credentials :data:`S3RVER_CREDS`. Installed by ``make s3rver``."""
    import boto3

    node = shutil.which("node")
    if node is None or not S3RVER_BIN.exists():
        pytest.fail("s3rver is not installed: run `make s3rver` (needs node and npm)")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    data = tmp / "s3rver-data"
    args = [node, str(S3RVER_BIN), "-d", str(data), "-a", "127.0.0.1", "-p", str(port)]
    log = tmp / "s3rver.log"
    try:
        with service(args, f"{endpoint}/", log) as proc:
            boto3.client(
                "s3",
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id=S3RVER_CREDS["access_key_id"],
                aws_secret_access_key=S3RVER_CREDS["secret_access_key"],
            ).create_bucket(Bucket=bucket)
            yield S3rver(endpoint=endpoint, pid=proc.pid, log=log)
    finally:
        shutil.rmtree(data, ignore_errors=True)  # gigabytes: not left for pytest's tmp
