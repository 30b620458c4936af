"""Simulated releases read through production's reader: a real Prometheus
(:class:`~infra.metrics.promql_prometheus.PrometheusMetrics`) over the gateway's counters, and the
real alert rules (infra/prometheus/rules.yml) evaluated over the same data.

Many releases of one population and candidate kind share one TSDB (each its own
``model``/``workload`` labels) and one Prometheus process. The gateway's exposition
(:class:`~infra.gateway.metrics.GatewayMetrics`, as Prometheus scrapes ``/admin/metrics``) is
kept every 15 s of simulated time, written as OpenMetrics with timestamps and backfilled with
``promtool tsdb create-blocks-from openmetrics``: a version's series appear when the gateway
creates them, so what ``increase()`` misses of a series' first increment is measured, not
hidden. A step's end is only known once Prometheus has judged it, so each canary step is a
round: every live release serves the step's weight until its deadline, Prometheus is started
over the blocks, the real :func:`~tasks.release.canary.canary.watch_step` reads at simulated times,
and each release is rewound to the second its step ended (:meth:`World.rewind`) before the next
step. The shadow phase reads trace pairs, not metrics, and runs live.

Alerts: each release alert's ``expr`` is evaluated with ``query_range`` every 15 s (the rule
evaluation interval) over the final data; it fires once it has held for its ``for:``, and a
fired alert rolls the release back then (production's fast path) unless the release had ended.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import httpx
import yaml

from infra.errors import MetricsError
from infra.metrics.promql_prometheus import PrometheusMetrics, instant_rows
from infra.settings import ReleaseSettings
from tasks.release.canary.canary import watch_step
from tasks.release.canary.rollout import Clock
from tests.benchmarks.release_sim import POLICY, Outcome, ended, run_shadow, start_step
from tests.benchmarks.release_world import Names, Population, Version, World

BASE = 1_700_000_000  # the unix time of simulated second 0 (fixed, so runs repeat)
RULES = Path(__file__).resolve().parents[2] / "infra/prometheus/rules.yml"
EVAL_S = 15  # the rule evaluation interval


class KeepAliveClient:
    """:class:`~infra.metrics.promql_prometheus.PrometheusClient`'s queries over one kept-alive
    connection (the benchmark makes thousands; a connection each would measure TCP, not the
    release)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=30.0)

    def query(self, expr: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        params: dict[str, str] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        body = self.http.get("/api/v1/query", params=params).json()
        if body.get("status") != "success":
            raise MetricsError(f"Prometheus query failed: {body.get('error')}")
        return instant_rows(body["data"])

    def query_range(self, expr: str, start: float, end: float) -> list[dict[str, Any]]:
        """The matrix of ``expr`` every ``EVAL_S`` from ``start`` to ``end``."""
        params: dict[str, str | float] = {"query": expr, "start": start, "end": end, "step": EVAL_S}
        body = self.http.get("/api/v1/query_range", params=params).json()
        if body.get("status") != "success":
            raise MetricsError(f"Prometheus range query failed: {body.get('error')}")
        return list(body["data"]["result"])


@dataclass
class Release:
    """One simulated release in a batch."""

    world: World
    step_start: int = 0
    end_t: int = 0
    outcome: Outcome | None = None


def write_openmetrics(path: Path, releases: list[Release]) -> None:
    """Every release's scrapes as one OpenMetrics file, in time order."""
    by_t: dict[int, list[list[str]]] = {}
    for r in releases:
        for t, lines in r.world.scrapes:
            by_t.setdefault(t, []).append(lines)
    with path.open("w") as f:
        for t in sorted(by_t):
            stamp = f" {BASE + t}\n"
            for lines in by_t[t]:
                f.writelines(line + stamp for line in lines)
        f.write("# EOF\n")


def backfill_scrapes(releases: list[Release], tmp: Path) -> None:
    """A TSDB in ``tmp/data`` holding the releases' scrapes."""
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "data").mkdir(parents=True)
    write_openmetrics(tmp / "scrapes.om", releases)
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--max-block-duration=24h",
            str(tmp / "scrapes.om"),
            str(tmp / "data"),
        ],
        check=True,
        capture_output=True,
    )


@contextmanager
def prometheus_over(releases: list[Release], tmp: Path) -> Iterator[KeepAliveClient]:
    """A Prometheus on loopback over a TSDB backfilled with the releases' scrapes."""
    backfill_scrapes(releases, tmp)
    with prometheus_on(tmp) as client:
        yield client


@contextmanager
def prometheus_on(tmp: Path) -> Iterator[KeepAliveClient]:
    """A Prometheus on loopback over the TSDB in ``tmp/data``."""
    from tests.procs import find_binary, free_port, service

    (tmp / "prometheus.yml").write_text("global: {scrape_interval: 15s}\n")
    port = free_port()
    args = [
        find_binary("prometheus"),
        f"--config.file={tmp / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=100y",
        "--log.level=warn",
    ]
    url = f"http://127.0.0.1:{port}"
    with service(args, f"{url}/-/ready", tmp / "prometheus.log"):
        client = KeepAliveClient(url)
        try:
            yield client
        finally:
            client.http.close()


def recording_levels() -> list[list[dict[str, Any]]]:
    """The rules file's recording rules in dependency order: each level reads only the scraped
    series and the levels before it (promtool evaluates a rule against the data it is given,
    so a rule that reads another must wait until that one is in the TSDB)."""
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    pending = [r for r in rules if "record" in r]
    levels: list[list[dict[str, Any]]] = []
    while pending:
        names = {r["record"] for r in pending}
        ready = [r for r in pending if not any(_reads(r["expr"], n) for n in names)]
        if not ready:
            raise ValueError(f"recording rules read each other in a cycle: {sorted(names)}")
        levels.append(ready)
        pending = [r for r in pending if r not in ready]
    return levels


def _reads(expr: str, name: str) -> bool:
    return re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", expr) is not None


def backfill_recording_rules(tmp: Path, end: int) -> None:
    """The rules file's recording rules evaluated every 15 s over ``tmp/data`` (``promtool
    tsdb create-blocks-from rules``, level by level, a Prometheus over the data for each)
    into ``tmp/data``, for the alerts that read them."""
    for i, level in enumerate(recording_levels()):
        rules = tmp / f"records{i}.yml"
        rules.write_text(yaml.safe_dump({"groups": [{"name": f"level{i}", "rules": level}]}))
        out = tmp / f"records{i}"
        with prometheus_on(tmp) as client:
            subprocess.run(
                [
                    "promtool",
                    "tsdb",
                    "create-blocks-from",
                    "rules",
                    f"--url={client.url}",
                    f"--start={BASE}",
                    f"--end={BASE + end}",
                    f"--eval-interval={EVAL_S}s",
                    f"--output-dir={out}",
                    str(rules),
                ],
                check=True,
                capture_output=True,
            )
        for block in out.iterdir():
            if block.is_dir():
                block.rename(tmp / "data" / block.name)


def judge_step(r: Release, client: KeepAliveClient, policy: ReleaseSettings, span: float) -> bool:
    """The real canary step of ``r`` read from Prometheus at simulated times, the release then
    rewound to the second the step ended. True (and rewound to the step's start) when the step
    ran past the ``span`` seconds of traffic served for it: it needs a longer one."""
    t = [float(BASE + r.step_start)]
    clock = Clock(now=lambda: t[0], sleep=lambda s: t.__setitem__(0, t[0] + s))
    reader = PrometheusMetrics(client, clock=lambda: t[0])  # type: ignore[arg-type]
    w = r.world
    result = watch_step(
        cast(Any, w),
        w.names.candidate,
        stable=w.names.stable,
        metrics=reader,
        policy=policy,
        clock=clock,
    )
    end = math.ceil(t[0]) - BASE
    if end > r.step_start + span:
        w.rewind(r.step_start)
        return True
    w.rewind(end)
    if result.verdict == "pass":
        r.step_start = end
    else:
        r.outcome, r.end_t = ended(result, w, "canary"), end
    return False


def run_step(rels: list[Release], step: int, policy: ReleaseSettings, tmp: Path) -> None:
    """Canary step ``step`` of every live release: first with traffic up to the step's horizon,
    then, for the steps still waiting (too little data), up to its deadline."""
    pending = [r for r in rels if r.outcome is None]
    for r in pending:
        start_step(r.world, policy, step)
    spans = (policy.analysis_interval_s, policy.step_deadline_s)
    for i, span in enumerate(s + 2 * policy.poll_s for s in spans):
        for r in pending:
            r.world.advance(span)
        with prometheus_over(rels, tmp / f"step{step}-{i}") as client, ThreadPoolExecutor(4) as ex:
            longer = list(
                ex.map(partial(judge_step, client=client, policy=policy, span=span), pending)
            )
        pending = [r for r, more in zip(pending, longer, strict=True) if more]
        if not pending:
            return


def release_alerts() -> list[tuple[str, str, float]]:
    """(name, expr, for seconds) of the release rules that roll back (``action: rollback``)."""
    out = []
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            if "alert" in rule and rule.get("labels", {}).get("action") == "rollback":
                out.append((rule["alert"], rule["expr"], _seconds(rule.get("for", "0s"))))
    return out


def _seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(text[:-1]) * units[text[-1]]


def alert_fires(client: KeepAliveClient, end: int) -> dict[tuple[str, str], tuple[int, str]]:
    """(model, workload) -> (the first simulated second a release alert fired, its name)."""
    fires: dict[tuple[str, str], tuple[int, str]] = {}
    for name, expr, hold in release_alerts():
        for series in client.query_range(expr, BASE, BASE + end):
            key = (series["metric"].get("model", ""), series["metric"].get("workload", ""))
            at = _first_fire([float(ts) for ts, _ in series["values"]], hold)
            if at is not None and (key not in fires or at - BASE < fires[key][0]):
                fires[key] = (int(at - BASE), name)
    return fires


def alerts_over(rels: list[Release], tmp: Path, end: int) -> dict[tuple[str, str], tuple[int, str]]:
    """:func:`alert_fires` over the releases' scrapes and the recording rules they feed."""
    backfill_scrapes(rels, tmp)
    backfill_recording_rules(tmp, end)
    with prometheus_on(tmp) as client:
        return alert_fires(client, end)


def _first_fire(times: list[float], hold: float) -> float | None:
    """The first evaluation at which the expression has held for ``hold`` seconds."""
    start = None
    for i, ts in enumerate(times):
        if i == 0 or ts - times[i - 1] > EVAL_S + 1:
            start = ts
        if start is not None and ts - start >= hold:
            return ts
    return None


def simulate_batch(
    items: list[tuple[Version, Population, int]],
    *,
    policy: ReleaseSettings = POLICY,
    workdir: Path | None = None,
) -> list[Outcome]:
    """One release per ``(candidate, population, seed)``, all read through one Prometheus per
    canary step, with the alert rules; their outcomes in order."""
    rels = [
        Release(
            World(
                pop,
                cand,
                seed=seed,
                record=True,
                shadow_fraction=policy.shadow_fraction,
                meter_cost=policy.cost_ratio_max is not None,
                names=Names(f"s{i}", f"c{i}", f"w{i}", f"r{i}"),
            )
        )
        for i, (cand, pop, seed) in enumerate(items)
    ]
    tmp = workdir or Path(tempfile.mkdtemp(prefix="release-prom-"))
    for r in rels:
        result = run_shadow(r.world, policy)
        r.step_start = r.end_t = r.world.t
        if result.verdict != "pass":
            r.outcome = ended(result, r.world, "shadow")
    for step in range(len(policy.canary_steps)):
        if any(r.outcome is None for r in rels):
            run_step(rels, step, policy, tmp)
    for r in rels:
        if r.outcome is None:
            r.outcome, r.end_t = Outcome("promoted", r.world.candidate_requests), r.world.t
    end = max(r.end_t for r in rels)
    fires = alerts_over(rels, tmp / "alerts", end)
    out = []
    for r in rels:
        fire = fires.get((r.world.names.candidate, r.world.names.workload))
        assert r.outcome is not None
        if fire is not None and fire[0] <= r.end_t:
            reqs = r.world.candidate_requests_at(fire[0])
            r.outcome = Outcome("rolled_back", reqs, f"alert {fire[1]}", [f"alert {fire[1]}"])
        out.append(r.outcome)
    if workdir is None:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
