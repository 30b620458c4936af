"""Several gateway worker processes behind one port: every request answered and traced, and
``/metrics`` on any worker counts the requests of all of them."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.fakes.loopback import post_many
from tests.fakes.upstream import start_fake_upstream

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
N = 120


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the gateway exited"
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(url)


TOKEN = "workers-admin-token-0123456789abcdef0123"


def _requests_total(admin_url: str) -> float:
    """Requests answered, from the admin listener (the public /metrics names no route)."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    text = httpx.get(f"{admin_url}/admin/metrics", headers=auth, timeout=10).text
    return sum(float(v) for v in re.findall(r"^agent_requests_total\{[^}]*\} (\S+)$", text, re.M))


def test_two_workers_serve_one_port_with_metrics_summed_over_both(tmp_path: Path) -> None:
    upstream = start_fake_upstream("v0")
    port, admin_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYWHEEL_")}
    env.update(
        {
            "FLYWHEEL_HOME": str(tmp_path),
            "FLYWHEEL_GATEWAY__PORT": str(port),
            "FLYWHEEL_GATEWAY__ADMIN_PORT": str(admin_port),
            "FLYWHEEL_GATEWAY__ADMIN_TOKEN": TOKEN,
            "FLYWHEEL_GATEWAY__WORKERS": "2",
            "FLYWHEEL_GATEWAY__DIVERSE_FRACTION": "0",
            "FLYWHEEL_GATEWAY__UPSTREAMS": json.dumps({"v0": upstream.url}),
            "PYTHONPATH": str(ROOT),
        }
    )
    proc = subprocess.Popen([sys.executable, "-m", "infra.gateway"], env=env, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(f"{url}/healthz", proc)
        workers = psutil.Process(proc.pid).children()
        assert len(workers) >= 2  # (spawn may add its resource tracker)
        body = {"messages": [{"role": "user", "content": "What is 2 + 2?"}]}
        replies = asyncio.run(post_many(url, "/v1/chat/completions", [body] * N, concurrency=8))
        assert [r.status for r in replies] == [200] * N
        # each scrape may reach either worker: both answer the total of both
        admin_url = f"http://127.0.0.1:{admin_port}"
        assert [_requests_total(admin_url) for _ in range(6)] == [float(N)] * 6
        trace_ids = {r.headers["x-trace-id"] for r in replies}
    finally:
        proc.terminate()
        proc.wait(60)
        upstream.stop()
    assert proc.returncode == 0 or proc.returncode == -15
    lines = [
        json.loads(line)
        for path in (tmp_path / "store" / "traces").rglob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert {t["trace_id"] for t in lines} == trace_ids
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in workers)
