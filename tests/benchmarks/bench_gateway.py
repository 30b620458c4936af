"""Gateway overhead: p50/p99 latency through the gateway vs calling the upstream directly.

Three processes on loopback: a fast fake OpenAI upstream, the gateway (``python -m
infra.gateway``, spool tracing on), and this open-loop load generator (fixed request rate,
latency measured from each request's scheduled send time, so queueing is not hidden). Phases
alternate direct / gateway to cancel machine drift; the report prints absolute ms, the added
ms and the ratio. Goal (issue 3): <= 1 ms added at p50, <= 5 ms at p99, at 200 req/s.

    python tests/benchmarks/bench_gateway.py [--rate 200] [--seconds 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from infra.gateway.testing import open_loop

ROOT = Path(__file__).resolve().parents[2]
BODY = {
    "model": "flywheel",
    "messages": [{"role": "user", "content": "What is 21 + 21?"}],
    "user": "u",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise TimeoutError(url)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def process(args: list[str], env: dict[str, str], ready: str) -> Iterator[int]:
    proc = subprocess.Popen(
        args, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_ready(ready)
        yield proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def load(url: str, rate: float, seconds: float) -> tuple[list[float], int]:
    """Open-loop load through the cheap loopback client; (latencies in s, errors)."""
    result = asyncio.run(open_loop(url, "/v1/chat/completions", BODY, rate=rate, seconds=seconds))
    return result.latencies, result.errors


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description="gateway overhead benchmark")
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    up_port, gw_port = free_port(), free_port()
    up_url, gw_url = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{gw_port}"
    home = tempfile.mkdtemp(prefix="flywheel-bench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYWHEEL_")}
    env.update(
        {
            "FLYWHEEL_HOME": home,
            "FLYWHEEL_GATEWAY__PORT": str(gw_port),
            "FLYWHEEL_GATEWAY__UPSTREAMS": json.dumps({"v0": f"{up_url}/v1"}),
            "FLYWHEEL_GATEWAY__DIVERSE_FRACTION": "0",
        }
    )
    py = sys.executable
    up_cmd = [py, "-m", "infra.gateway.testing", "--port", str(up_port), "--version", "v0"]
    with (
        process(up_cmd, env, f"{up_url}/v1/models") as up_pid,
        process([py, "-m", "infra.gateway"], env, f"{gw_url}/healthz") as gw_pid,
    ):
        load(up_url, args.rate, 2)  # warm-up
        load(gw_url, args.rate, 2)
        results: dict[str, list[float]] = {"direct": [], "gateway": []}
        errors = {"direct": 0, "gateway": 0}
        gw_cpu = up_cpu = 0.0
        for i in range(args.rounds):
            for name, url in (("direct", up_url), ("gateway", gw_url)):
                cpu0, ucpu0 = cpu_seconds(gw_pid), cpu_seconds(up_pid)
                lat, err = load(url, args.rate, args.seconds)
                if name == "gateway":
                    gw_cpu += cpu_seconds(gw_pid) - cpu0
                else:
                    up_cpu += cpu_seconds(up_pid) - ucpu0
                results[name] += lat
                errors[name] += err
                print(
                    f"  round {i + 1} {name:7s}: p50 {pct(lat, 0.5):6.2f} ms  p99 {pct(lat, 0.99):7.2f} ms"
                )
        time.sleep(1.5)  # one more spool flush
        traces = sum(len(p.read_text().splitlines()) for p in Path(home, "store").rglob("*.jsonl"))
    d50, d99 = pct(results["direct"], 0.5), pct(results["direct"], 0.99)
    g50, g99 = pct(results["gateway"], 0.5), pct(results["gateway"], 0.99)
    n = len(results["gateway"])
    print(
        f"gateway overhead at {args.rate:.0f} req/s, {n} requests per side, "
        f"cores={os.cpu_count()}, load average {os.getloadavg()[0]:.1f}\n"
        "  (latency means something only on an otherwise idle machine; CPU per request does not "
        "depend on it)"
    )
    print(f"  direct : p50 {d50:7.2f} ms   p99 {d99:7.2f} ms   errors {errors['direct']}")
    print(f"  gateway: p50 {g50:7.2f} ms   p99 {g99:7.2f} ms   errors {errors['gateway']}")
    print(f"  added  : p50 {g50 - d50:+7.2f} ms   p99 {g99 - d99:+7.2f} ms   (goal <= 1 / <= 5 ms)")
    print(f"  ratio  : p50 {g50 / d50:7.2f} x    p99 {g99 / d99:7.2f} x")
    print(
        f"  CPU per request (user+system): gateway {gw_cpu / n * 1000:.2f} ms, "
        f"fake upstream (same uvicorn server stack) {up_cpu / n * 1000:.2f} ms"
    )
    print(f"  traces in the spool: {traces} (every gateway request, warm-up included)")


if __name__ == "__main__":
    main()
