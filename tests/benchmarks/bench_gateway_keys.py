"""What client API keys cost the gateway: CPU and latency per request of a keyed gateway (every
request shows a key, checked against the ring, rate-limited and given a voice quota; two keys
active so the per-key voice cap runs) against the same gateway in open mode and a bare
pass-through proxy, all measured in the same run, in alternation (``--rounds``): CPU per
request drifts on a shared VM from one minute to the next, so sides measured minutes apart
are not comparable.

Processes on loopback: the fake upstream (``tests.fakes.upstream``), the pass-through
(``tests.benchmarks.passthrough``), two gateways (``python -m infra.gateway``, each its own
home; spool tracing, diverse sampling off so each request is one upstream call), and this
open-loop load generator. Every keyed request must answer 200 (a 401 would be an error).

    PYTHONPATH=. python tests/benchmarks/bench_gateway_keys.py                 # 300 req/s
    PYTHONPATH=. python tests/benchmarks/bench_gateway_keys.py --rate 500 --seconds 20

Goal (issue 52): the keyed gateway's CPU per request within 1.3 x the open gateway's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from tests.benchmarks.bench_gateway import free_port, pct, process
from tests.fakes.loopback import LoadResult, open_loop
from tests.procs import tree_cpu

ROOT = Path(__file__).resolve().parents[2]
BODY = {
    "model": "flywheel",
    "messages": [
        {"role": "system", "content": "You answer questions about orders."},
        {"role": "user", "content": "Where is order A-1042?"},
    ],
    "user": "customer-17",
}


def load(url: str, rate: float, seconds: float, headers: dict[str, str] | None) -> LoadResult:
    return asyncio.run(
        open_loop(url, "/v1/chat/completions", BODY, rate=rate, seconds=seconds, headers=headers)
    )


def keyed_home(home: str) -> str:
    """Two client keys in ``home``'s store (so the voice cap is on); returns one of them."""
    from infra.client_keys import create_key
    from infra.settings import Settings
    from infra.store import open_store

    store = open_store(Settings(home=Path(home)))
    _, key = create_key(store, name="storefront", rate_per_min=10_000_000)
    create_key(store, name="partner")
    return key


def main() -> None:
    parser = argparse.ArgumentParser(description="gateway overhead with client API keys")
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--seconds", type=float, default=12.0, help="per side, all rounds")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    sides = ("direct", "passthrough", "open", "keyed")
    ports = {name: free_port() for name in sides}
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    homes = {name: tempfile.mkdtemp(prefix=f"flywheel-bench-{name}-") for name in ("open", "keyed")}
    key = keyed_home(homes["keyed"])
    base = {k: v for k, v in os.environ.items() if not k.startswith("FLYWHEEL_")}
    base |= {
        "PYTHONPATH": str(ROOT),
        "FLYWHEEL_GATEWAY__UPSTREAMS": json.dumps({"v0": f"{urls['direct']}/v1"}),
        "FLYWHEEL_GATEWAY__DIVERSE_FRACTION": "0",
    }
    envs = {
        name: base | {"FLYWHEEL_HOME": homes[name], "FLYWHEEL_GATEWAY__PORT": str(ports[name])}
        for name in ("open", "keyed")
    }
    py = sys.executable
    commands = {
        "direct": [py, "-m", "tests.fakes.upstream", "--port", str(ports["direct"])]
        + ["--version", "v0"],
        "passthrough": [py, "-m", "tests.benchmarks.passthrough", "--port"]
        + [str(ports["passthrough"]), "--upstream", urls["direct"]],
        "open": [py, "-m", "infra.gateway"],
        "keyed": [py, "-m", "infra.gateway"],
    }
    ready = {
        "direct": f"{urls['direct']}/v1/models",
        "passthrough": f"{urls['passthrough']}/v1/models",
        "open": f"{urls['open']}/healthz",
        "keyed": f"{urls['keyed']}/healthz",
    }
    headers = {"keyed": {"Authorization": f"Bearer {key}"}}
    load0 = os.getloadavg()[0]
    with ExitStack() as stack:
        pids = {
            n: stack.enter_context(process(commands[n], envs.get(n, base), ready[n])) for n in sides
        }
        refused = load(urls["keyed"], 20, 0.5, None)  # no key: every request refused
        assert refused.statuses and set(refused.statuses) == {401}, refused.statuses
        for name in sides:  # warm-up
            load(urls[name], 100, 1, headers.get(name))
        cpu = dict.fromkeys(sides, 0.0)
        lat: dict[str, list[float]] = {n: [] for n in sides}
        errors = dict.fromkeys(sides, 0)
        ratios = []
        for _ in range(args.rounds):
            used = {}
            for name in sides:
                cpu0 = tree_cpu(pids[name])
                result = load(urls[name], args.rate, args.seconds / args.rounds, headers.get(name))
                used[name] = tree_cpu(pids[name]) - cpu0
                cpu[name] += used[name]
                lat[name] += result.latencies
                errors[name] += result.errors
                time.sleep(0.5)
            ratios.append(used["keyed"] / max(used["open"], 1e-9))
    per = {n: cpu[n] / max(1, len(lat[n])) * 1000 for n in sides}
    print(
        f"gateway with client keys: {args.rate:.0f} req/s, {len(lat['keyed'])} requests a side, "
        f"cores={os.cpu_count()}, load average before {load0:.1f}, after {os.getloadavg()[0]:.1f}"
    )
    for name in sides:
        print(
            f"  {name:11}: p50 {pct(lat[name], 0.5):7.2f} ms  p99 {pct(lat[name], 0.99):8.2f} ms"
            f"  CPU {per[name]:.3f} ms/request  errors {errors[name]}"
        )
    print(
        f"  keyed / open CPU per request: {per['keyed'] / per['open']:.2f} x "
        f"(per round {' '.join(f'{r:.2f}' for r in ratios)}; goal <= 1.3)"
    )
    print(
        f"  CPU per request vs the pass-through: open {per['open'] / per['passthrough']:.2f} x, "
        f"keyed {per['keyed'] / per['passthrough']:.2f} x"
    )
    print(
        f"  added p50 over direct: open {pct(lat['open'], 0.5) - pct(lat['direct'], 0.5):+.2f} ms,"
        f" keyed {pct(lat['keyed'], 0.5) - pct(lat['direct'], 0.5):+.2f} ms"
    )


if __name__ == "__main__":
    main()
