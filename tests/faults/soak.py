"""The gateway soak shared by the bounded test (``tests/faults/test_gateway_soak.py``) and the
5-minute benchmark (``tests/benchmarks/bench_gateway_soak.py``): the gateway process under an
open-loop load while its upstream fails 20 % of calls and the S3 store behind it (moto on
loopback, through :mod:`tests.fakes.faults`) fails 20 % of writes.

What a user and an operator would notice, measured: replies that failed beyond the upstream's
own failures (a 503 at the gateway's per-client connection limit is allowed only where the
load client really held more connections than that limit, as when its process stalled on a
loaded machine and then sent the overdue requests at once; each such refusal counted), the
gateway's resident memory after warm-up and at the end, and the traces: every reply's trace
id in the spool unless counted as dropped."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from infra.settings.gateway import GatewaySettings
from tests.fakes.faults import Aim, fault_proxy
from tests.fakes.loopback import open_loop
from tests.fakes.upstream import start_fake_upstream
from tests.procs import free_port, s3_server, wait_http

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "flywheel-soak"
PER_CLIENT = GatewaySettings.model_fields["max_connections_per_client"].default
BODY = {"model": "flywheel", "messages": [{"role": "user", "content": "What is 2+2?"}]}


class CountingRandom(random.Random):
    """The upstream's failure draw, counting the failures it decides (``< rate``)."""

    def __init__(self, seed: int, rate: float) -> None:
        super().__init__(seed)
        self.rate, self.failures = rate, 0

    def random(self) -> float:
        value = super().random()
        self.failures += value < self.rate
        return value


@dataclass
class SoakResult:
    """What the soak saw."""

    requests: int
    errors: int  # replies that were not 200, plus requests with no reply at all
    busy: int  # of which 503 (the gateway's answer at a connection limit)
    refused: dict[str, float]  # flywheel_connections_refused_total by limit
    peak_connections: int  # the most connections the load client held open at once
    no_reply: int
    no_reply_kinds: dict[str, int]  # why: the client's exception, by kind (no values)
    upstream_failures: int
    rss_warm_kib: int
    rss_end_kib: int
    trace_ids: set[str]
    spooled: set[str]
    dropped: float
    store_faults: int
    retries: dict[str, float]


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError(f"no VmRSS for {pid}")


def _metrics(url: str) -> str:
    return httpx.get(f"{url}/metrics", timeout=10).text


def _sum(text: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M))


def _spooled(endpoint: str) -> set[str]:
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    ids: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="gw/traces/"):
        for obj in page.get("Contents", []):
            body = s3.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read().decode()
            for line in body.splitlines():
                record = json.loads(line) if line.strip() else {}
                if record.get("type") == "trace" and "trace_id" in record:
                    ids.add(record["trace_id"])
    return ids


def _load(url: str, rate: float, seconds: float) -> Any:
    return asyncio.run(open_loop(url, "/v1/chat/completions", BODY, rate=rate, seconds=seconds))


def soak(home: Path, *, rate: float, seconds: float, warmup_s: float = 5.0) -> SoakResult:
    """Run the soak (``warmup_s`` of load, then ``seconds`` more) and return what it saw."""
    rng = CountingRandom(7, 0.2)
    upstream = start_fake_upstream("v0", fail_rate=0.2, rng=rng)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (
        s3_server(BUCKET) as endpoint,
        fault_proxy(
            endpoint, rate=0.2, seed=5, aim=Aim(methods=frozenset({"PUT", "POST"}))
        ) as store,
    ):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLYWHEEL_", "PREFECT_"))}
        env.update(
            {
                "PYTHONPATH": str(ROOT),
                "FLYWHEEL_HOME": str(home),
                "FLYWHEEL_GATEWAY__PORT": str(port),
                "FLYWHEEL_GATEWAY__UPSTREAMS": json.dumps({"v0": upstream.url}),
                "FLYWHEEL_STORE_URL": f"s3://{BUCKET}/gw",
                "FLYWHEEL_S3_ENDPOINT_URL": store.url,
                "FLYWHEEL_S3_ACCESS_KEY_ID": "testing",
                "FLYWHEEL_S3_SECRET_ACCESS_KEY": "testing",
            }
        )
        log = (home.parent / "gateway.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "infra.gateway"], env=env, cwd=ROOT, stdout=log, stderr=log
        )
        try:
            wait_http(f"{url}/healthz", timeout=90, proc=proc)
            warm = _load(url, rate, warmup_s)
            rss_warm = _rss_kib(proc.pid)
            rest = _load(url, rate, seconds)
            rss_end = _rss_kib(proc.pid)
            time.sleep(3)  # the trace sink's last flush
            text = _metrics(url)
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
            upstream.stop()
        spooled = _spooled(endpoint)
    retries = dict(
        re.findall(r'^flywheel_retries_total{operation="([^"]+)"} ([0-9.e+]+)$', text, re.M)
    )
    refused = re.findall(
        r'^flywheel_connections_refused_total{limit="([^"]+)"} ([0-9.e+]+)$', text, re.M
    )
    return SoakResult(
        requests=len(warm.statuses) + warm.failures + len(rest.statuses) + rest.failures,
        errors=warm.errors + rest.errors,
        busy=(warm.statuses + rest.statuses).count(503),
        refused={limit: float(n) for limit, n in refused},
        peak_connections=max(warm.connections.peak, rest.connections.peak),
        no_reply=warm.failures + rest.failures,
        no_reply_kinds={
            kind: warm.failure_kinds.get(kind, 0) + rest.failure_kinds.get(kind, 0)
            for kind in {**warm.failure_kinds, **rest.failure_kinds}
        },
        upstream_failures=rng.failures,
        rss_warm_kib=rss_warm,
        rss_end_kib=rss_end,
        trace_ids=set(warm.trace_ids) | set(rest.trace_ids),
        spooled=spooled,
        dropped=_sum(text, "flywheel_trace_sink_dropped_total"),
        store_faults=sum(store.faults.values()),
        retries={k: float(v) for k, v in retries.items()},
    )


def check(result: SoakResult) -> None:
    """The soak's acceptance, the same for the bounded test and the 5-minute benchmark."""
    assert result.no_reply == 0, result
    # a 503 only at the per-client limit, counted, and only past it (never at the total limit)
    refused = result.refused.get("client", 0.0)
    assert result.busy <= refused and not result.refused.get("total"), result
    assert not refused or result.peak_connections > PER_CLIENT, result
    assert result.errors - result.busy <= result.upstream_failures, result  # upstream's own
    assert result.rss_end_kib < result.rss_warm_kib * 1.10, result  # memory flat
    missing = result.trace_ids - result.spooled
    assert len(missing) <= result.dropped, (len(missing), result.dropped)  # every drop counted
    assert result.store_faults > 0 and sum(result.retries.values()) > 0, result
