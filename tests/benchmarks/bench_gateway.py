"""Gateway overhead under open-loop load: added latency and CPU per request, against a direct
call to the upstream and a bare pass-through proxy measured in the same run.

Processes on loopback: a fast fake OpenAI upstream (``tests.fakes.upstream``), the gateway
(``python -m infra.gateway``: spool tracing on, diverse sampling at the production default),
a bare pass-through proxy on the same server stack and HTTP client
(``tests.benchmarks.passthrough``: the floor for any Python proxy), the same pass-through on
aiohttp's client (what a typical Python proxy costs), and this load generator
(fixed request rate whatever the replies take, latency from each request's scheduled send
time, so queueing is not hidden). For each mode (JSON, streamed) and rate, the four sides run
in turn (direct, pass-through, aiohttp pass-through, gateway), ``--rounds`` times in
alternation: on a shared VM the CPU a request costs drifts by a third from one minute to the
next, so sides measured minutes apart are not comparable. Printed per rate: p50/p99 of each,
the gateway's added ms and ratio against direct, CPU per request of the gateway, both
pass-throughs and the upstream (``/proc``, user + system), and the traces: every reply's
``X-Trace-Id`` must be in the spool unless the bounded queue dropped it
(``flywheel_trace_sink_dropped_total``), and every prompt group of diverse siblings complete.
Then the highest rate at which the added p99 stays under ``--p99-budget-ms`` (JSON requests).

    PYTHONPATH=. python tests/benchmarks/bench_gateway.py              # 200, 500, 1000 req/s
    PYTHONPATH=. python tests/benchmarks/bench_gateway.py --rates 200 500 --seconds 5 \
        --modes json --max-rate 0                                      # quicker
    PYTHONPATH=. python tests/benchmarks/bench_gateway.py --workers 2  # several processes

Latency means something only on an otherwise idle machine (the load average is printed);
CPU per request depends on it far less. Acceptance (issue 18): CPU per request <= 1.5 x the
pass-through; at 500 req/s added p99 <= 10 ms, 0 errors, every trace in the spool; at 1000
req/s no errors, traces missing only as counted drops.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.fakes.loopback import LoadResult, open_loop
from tests.procs import tree_cpu

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = [{"role": "user", "content": "What is 21 + 21?"}]


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
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_load(url: str, body: dict, rate: float, seconds: float) -> LoadResult:
    # asyncio's own loop: uvloop's clock ticks in whole milliseconds, too coarse here
    return asyncio.run(open_loop(url, "/v1/chat/completions", body, rate=rate, seconds=seconds))


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def scrape(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


@dataclass
class Phase:
    mode: str
    rate: float
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    cpu_ms: dict[str, float] = field(default_factory=dict)
    trace_ids: list[str] = field(default_factory=list)
    dropped: float = 0.0
    skipped: float = 0.0
    round_ratios: list[float] = field(default_factory=list)  # gateway / pass-through CPU

    def added(self, q: float) -> float:
        return pct(self.latencies["gateway"], q) - pct(self.latencies["direct"], q)


@dataclass
class Setup:
    urls: dict[str, str]
    pids: dict[str, int]
    home: str


def measure(
    setup: Setup, *, mode: str, rate: float, seconds: float, logprobs: bool, rounds: int = 1
) -> Phase:
    """The sides in turn, ``rounds`` times (``seconds / rounds`` each): CPU per request
    drifts on a shared VM from one minute to the next, so sides measured in alternation, their
    CPU and requests summed over the rounds, compare like with like."""
    body = {"model": "flywheel", "messages": MESSAGES, "user": "u", "stream": mode == "stream"}
    if logprobs:  # every side is asked for them: the upstream answers all three alike
        body["logprobs"] = True
    phase = Phase(mode, rate)
    gw = setup.urls["gateway"]
    names = tuple(setup.urls)
    cpu = dict.fromkeys(names, 0.0)
    dropped0 = scrape(gw, "flywheel_trace_sink_dropped_total")
    skipped0 = scrape(gw, "flywheel_diverse_siblings_skipped_total")
    for _ in range(rounds):
        used: dict[str, float] = {}
        for name in names:
            pid = setup.pids[name]
            cpu0 = tree_cpu(pid)
            result = run_load(setup.urls[name], body, rate, seconds / rounds)
            used[name] = tree_cpu(pid) - cpu0
            cpu[name] += used[name]
            phase.latencies.setdefault(name, []).extend(result.latencies)
            phase.errors[name] = phase.errors.get(name, 0) + result.errors
            if name == "gateway":
                phase.trace_ids += result.trace_ids
            time.sleep(0.5)
        phase.round_ratios.append(used["gateway"] / max(used["passthrough"], 1e-9))
    for name in names:
        phase.cpu_ms[name] = cpu[name] / max(1, len(phase.latencies[name])) * 1000
    phase.dropped = scrape(gw, "flywheel_trace_sink_dropped_total") - dropped0
    phase.skipped = scrape(gw, "flywheel_diverse_siblings_skipped_total") - skipped0
    return phase


def spool(home: str) -> list[dict]:
    return [
        json.loads(line)
        for path in Path(home, "store", "traces").rglob("*.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def print_latency(phase: Phase) -> None:
    lat, cpu = phase.latencies, phase.cpu_ms
    d50, d99 = pct(lat["direct"], 0.5), pct(lat["direct"], 0.99)
    g50, g99 = pct(lat["gateway"], 0.5), pct(lat["gateway"], 0.99)
    print(f"\n{phase.mode} at {phase.rate:.0f} req/s, {len(lat['gateway'])} requests per side")
    print(f"  direct      : p50 {d50:7.2f} ms  p99 {d99:8.2f} ms  errors {phase.errors['direct']}")
    for name, label in (("passthrough", "pass-through"), ("aiohttp", "  on aiohttp")):
        p50, p99 = pct(lat[name], 0.5), pct(lat[name], 0.99)
        print(f"  {label}: p50 {p50:7.2f} ms  p99 {p99:8.2f} ms  errors {phase.errors[name]}")
    print(f"  gateway     : p50 {g50:7.2f} ms  p99 {g99:8.2f} ms  errors {phase.errors['gateway']}")
    print(f"  added       : p50 {g50 - d50:+7.2f} ms  p99 {g99 - d99:+8.2f} ms")
    print(f"  ratio       : p50 {g50 / d50:7.2f} x   p99 {g99 / d99:8.2f} x   (gateway / direct)")
    print(
        f"  CPU per request: gateway {cpu['gateway']:.3f} ms, pass-through "
        f"{cpu['passthrough']:.3f} ms ({cpu['gateway'] / cpu['passthrough']:.2f} x), "
        f"pass-through on aiohttp {cpu['aiohttp']:.3f} ms "
        f"({cpu['gateway'] / cpu['aiohttp']:.2f} x), "
        f"upstream alone {cpu['direct']:.3f} ms ({cpu['gateway'] / cpu['direct']:.2f} x)"
        + (
            f"; per round {' '.join(f'{r:.2f}' for r in phase.round_ratios)}"
            if len(phase.round_ratios) > 1
            else ""
        ),
        flush=True,
    )


def print_traces(phase: Phase, traces: dict[str, dict], groups: Counter) -> None:
    missing = [t for t in phase.trace_ids if t not in traces]
    served_groups = {traces[t]["prompt_group"] for t in phase.trace_ids if t in traces}
    sizes = Counter(groups[g] for g in served_groups)
    calls = sum(groups[g] for g in served_groups) or 1  # upstream calls: replies + siblings
    cpu = phase.cpu_ms
    per_call = cpu["gateway"] * len(phase.trace_ids) / calls
    print(
        f"{phase.mode} at {phase.rate:.0f} req/s: {len(phase.trace_ids) - len(missing)}/"
        f"{len(phase.trace_ids)} replies' traces in the spool, dropped by the bounded queue "
        f"(counted) {phase.dropped:.0f}, diverse groups {sizes.get(3, 0)} complete / "
        f"{sum(v for k, v in sizes.items() if k not in (1, 3))} partial, siblings skipped "
        f"(counted) {phase.skipped:.0f}; CPU per proxied upstream call (replies + siblings) "
        f"{per_call:.3f} ms = {per_call / cpu['passthrough']:.2f} x the pass-through"
    )


def max_rate(setup: Setup, *, budget_ms: float, seconds: float, ceiling: float) -> float:
    """The highest of a doubling-then-bisecting series of rates whose added p99 (JSON) stays
    under ``budget_ms`` with no errors."""
    good, bad, rate = 0.0, None, 200.0
    while rate <= ceiling and (bad is None or bad - good > max(50.0, good * 0.1)):
        phase = Phase("json", rate)
        body = {"model": "flywheel", "messages": MESSAGES, "user": "u"}
        for name in ("direct", "gateway"):
            result = run_load(setup.urls[name], body, rate, seconds)
            phase.latencies[name], phase.errors[name] = result.latencies, result.errors
            time.sleep(0.5)
        ok = phase.added(0.99) < budget_ms and not any(phase.errors.values())
        print(
            f"  {rate:6.0f} req/s: added p99 {phase.added(0.99):+8.2f} ms, {'ok' if ok else 'over'}"
        )
        if ok:
            good = rate
        else:
            bad = rate
        rate = rate * 2 if bad is None else (good + bad) / 2
    return good


def main() -> None:
    parser = argparse.ArgumentParser(description="gateway overhead benchmark (open loop)")
    parser.add_argument("--rates", type=float, nargs="+", default=[200.0, 500.0, 1000.0])
    parser.add_argument("--seconds", type=float, default=12.0, help="per side and rate")
    parser.add_argument(
        "--rounds", type=int, default=3, help="the sides in alternation, seconds/rounds each"
    )
    parser.add_argument("--modes", nargs="+", default=["json", "stream"])
    parser.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    parser.add_argument(
        "--diverse-fraction", type=float, default=None, help="default: the production default"
    )
    parser.add_argument(
        "--client-logprobs",
        action="store_true",
        help="clients ask for logprobs (the gateway asks every upstream for them anyway)",
    )
    parser.add_argument("--p99-budget-ms", type=float, default=10.0)
    parser.add_argument("--max-rate", type=float, default=3200.0, help="0: skip the search")
    args = parser.parse_args()
    sides = ("direct", "passthrough", "aiohttp", "gateway")  # the order each round runs them
    ports = {name: free_port() for name in sides}
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    home = tempfile.mkdtemp(prefix="flywheel-bench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYWHEEL_")}
    env.update(
        {
            "FLYWHEEL_HOME": home,
            "FLYWHEEL_GATEWAY__PORT": str(ports["gateway"]),
            "FLYWHEEL_GATEWAY__WORKERS": str(args.workers),
            "FLYWHEEL_GATEWAY__UPSTREAMS": json.dumps({"v0": f"{urls['direct']}/v1"}),
            "PYTHONPATH": str(ROOT),
        }
    )
    if args.diverse_fraction is not None:
        env["FLYWHEEL_GATEWAY__DIVERSE_FRACTION"] = str(args.diverse_fraction)
    py = sys.executable
    commands = {
        "direct": [py, "-m", "tests.fakes.upstream", "--port", str(ports["direct"])]
        + ["--version", "v0"],
        "passthrough": [py, "-m", "tests.benchmarks.passthrough", "--port"]
        + [str(ports["passthrough"]), "--upstream", urls["direct"]],
        "aiohttp": [py, "-m", "tests.benchmarks.passthrough", "--port"]
        + [str(ports["aiohttp"]), "--upstream", urls["direct"], "--client", "aiohttp"],
        "gateway": [py, "-m", "infra.gateway"],
    }
    ready = {
        "direct": f"{urls['direct']}/v1/models",
        "passthrough": f"{urls['passthrough']}/v1/models",
        "aiohttp": f"{urls['aiohttp']}/v1/models",
        "gateway": f"{urls['gateway']}/healthz",
    }
    load0 = os.getloadavg()
    print(f"load average before: {load0[0]:.1f} (cores={os.cpu_count()})", flush=True)
    with ExitStack() as stack:
        pids = {n: stack.enter_context(process(commands[n], env, ready[n])) for n in commands}
        setup = Setup(urls=urls, pids=pids, home=home)
        for name in sides:  # warm-up
            run_load(urls[name], {"messages": MESSAGES}, 100, 1)
        phases = []
        for mode in args.modes:
            for rate in args.rates:
                phases.append(
                    measure(
                        setup,
                        mode=mode,
                        rate=rate,
                        seconds=args.seconds,
                        logprobs=args.client_logprobs,
                        rounds=max(1, args.rounds),
                    )
                )
                print_latency(phases[-1])  # as it goes; traces are checked at the end
        best = None
        if args.max_rate > 0:
            print(f"\nhighest rate with added p99 < {args.p99_budget_ms:g} ms (JSON requests):")
            best = max_rate(
                setup, budget_ms=args.p99_budget_ms, seconds=args.seconds, ceiling=args.max_rate
            )
    traces = {t["trace_id"]: t for t in spool(home) if t.get("type") == "trace"}
    groups = Counter(t["prompt_group"] for t in traces.values())
    print(
        f"gateway benchmark: cores={os.cpu_count()}, gateway workers={args.workers}, "
        f"load average before {load0[0]:.1f}, after {os.getloadavg()[0]:.1f}; tracing to the "
        "spool, diverse fraction "
        + (
            "the production default"
            if args.diverse_fraction is None
            else str(args.diverse_fraction)
        )
    )
    for phase in phases:
        print_traces(phase, traces, groups)
    if best is not None:
        print(f"\nhighest rate with added p99 < {args.p99_budget_ms:g} ms: {best:.0f} req/s")


if __name__ == "__main__":
    main()
