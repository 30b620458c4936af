"""What hostile clients cost the gateway, in time (the tests assert behaviour, never a clock):

- a 4 MiB request of 1000 messages of 4 KB (answered, its trace capped) and one of 120,000
  tiny messages (refused, over ``MAX_MESSAGES``): their latency, and ``/livez``'s latency
  sampled every 10 ms meanwhile (issue 26: < 1 s and < 100 ms);
- ten streaming clients that stop reading, against a pool of four upstream connections: how
  long a plain request then takes (bounded by ``STALL_TIMEOUT_S``, set to 1 s here).

Processes on loopback: the fake upstream (``tests.fakes.upstream``) and the gateway
(``python -m infra.gateway``); this script is the client.

    PYTHONPATH=. python tests/benchmarks/bench_gateway_hostile.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from tests.benchmarks.bench_gateway import ROOT, free_port, pct, process


def livez_while(url: str, work: threading.Thread) -> list[float]:
    """``/livez`` latencies (s), one request every 10 ms while ``work`` runs."""
    seen: list[float] = []
    with httpx.Client(timeout=30) as client:
        while work.is_alive():
            t0 = time.perf_counter()
            client.get(f"{url}/livez")
            seen.append(time.perf_counter() - t0)
            time.sleep(0.01)
    return seen


def big_requests(url: str, repeat: int) -> None:
    many = [{"role": "user", "content": f"{n} " + "y" * 4000} for n in range(1000)]
    tiny = [{"role": "user", "content": "x"}] * 120_000
    for name, messages in (("1000 x 4 KB messages", many), ("120k tiny messages", tiny)):
        body = json.dumps({"messages": messages}).encode()
        times: list[float] = []
        livez: list[float] = []
        statuses: set[int] = set()

        def send(
            body: bytes = body, times: list[float] = times, statuses: set[int] = statuses
        ) -> None:
            with httpx.Client(timeout=120) as client:
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    resp = client.post(f"{url}/v1/chat/completions", content=body)
                    times.append(time.perf_counter() - t0)
                    statuses.add(resp.status_code)

        work = threading.Thread(target=send)
        work.start()
        livez = livez_while(url, work)
        work.join()
        print(
            f"{name} ({len(body) / 2**20:.1f} MiB, HTTP {sorted(statuses)}): "
            f"p50 {pct(times, 0.5):.0f} ms, max {max(times) * 1000:.0f} ms; "
            f"/livez meanwhile p50 {pct(livez, 0.5):.1f} ms, max {max(livez) * 1000:.1f} ms "
            f"({len(livez)} probes)",
            flush=True,
        )


def stalled_streams(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"messages": [{"role": "user", "content": "long"}], "stream": True})
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode())
    )
    socks = []
    for _ in range(10):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        sock.sendall(head)
        sock.recv(12)
        socks.append(sock)
    t0 = time.perf_counter()
    resp = httpx.post(
        f"{url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}]},
        timeout=120,
    )
    took = time.perf_counter() - t0
    print(
        f"10 stalled streams, pool of 4: a plain request answered HTTP {resp.status_code} "
        f"in {took * 1000:.0f} ms (stall timeout 1 s)",
        flush=True,
    )
    for sock in socks:
        sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="hostile clients against the gateway")
    parser.add_argument("--repeat", type=int, default=5, help="big requests of each kind")
    args = parser.parse_args()
    ports = {"upstream": free_port(), "gateway": free_port()}
    upstream = f"http://127.0.0.1:{ports['upstream']}"
    gateway = f"http://127.0.0.1:{ports['gateway']}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYWHEEL_")}
    env.update(
        {
            "FLYWHEEL_HOME": tempfile.mkdtemp(prefix="flywheel-hostile-"),
            "FLYWHEEL_GATEWAY__PORT": str(ports["gateway"]),
            "FLYWHEEL_GATEWAY__UPSTREAMS": json.dumps({"v0": f"{upstream}/v1"}),
            "FLYWHEEL_GATEWAY__DIVERSE_FRACTION": "0",
            "FLYWHEEL_GATEWAY__UPSTREAM_CONNECTIONS": "4",
            "FLYWHEEL_GATEWAY__STALL_TIMEOUT_S": "1",
            "PYTHONPATH": str(ROOT),
        }
    )
    py = sys.executable
    fake = [py, "-m", "tests.fakes.upstream", "--port", str(ports["upstream"]), "--version"]
    fake += ["v0", "--long-answers"]
    print(f"load average before: {os.getloadavg()[0]:.1f} (cores={os.cpu_count()})", flush=True)
    with (
        process(fake, env, f"{upstream}/v1/models"),
        process([py, "-m", "infra.gateway"], env, f"{gateway}/healthz"),
    ):
        big_requests(gateway, args.repeat)
        stalled_streams(gateway)
    print(f"load average after: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
