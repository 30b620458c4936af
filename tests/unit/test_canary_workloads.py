"""Canary metrics by workload: the gateway labels each request with the release line that
routed it (a workload with a release of its own, else ``default``; never a client's unknown
string), and a workload's canary analysis reads that workload's series alone, from the
embedded ``/metrics`` reader and from Prometheus alike."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from infra.gateway.calls import CallRecorder
from infra.gateway.metrics import GatewayMetrics
from infra.metrics.promql import CanaryWindow, RouteStats
from infra.metrics.promql_embedded import EmbeddedMetrics
from infra.metrics.promql_prometheus import PrometheusMetrics
from infra.routing import RoutingState, StoreRouting, WorkloadRelease, save_state, scoped
from infra.store import LocalStore
from tasks.release.canary.canary import watch_step
from tests.unit.test_release_canary import CFG, FakeClock

SQL = WorkloadRelease(candidate="v1", phase="canary", weight=10)


def test_requests_are_labelled_by_the_release_line_that_routed_them() -> None:
    state = RoutingState(stable="v0", workloads={"sql": SQL})
    watcher: Any = SimpleNamespace(state=state)
    recorder = CallRecorder(
        watcher=watcher,
        metrics=GatewayMetrics(),
        dispatcher=None,  # type: ignore[arg-type]
        trace_ids=None,  # type: ignore[arg-type]
        max_trace_chars=100,
    )
    assert recorder.line("sql") == "sql"
    # no release of its own (or a client's made-up name): the shared line, one bounded label
    assert [recorder.line(w) for w in ("support", "x" * 100, None, "default")] == ["default"] * 4


def test_the_embedded_reader_reads_one_workloads_series_alone() -> None:
    metrics = GatewayMetrics()
    t = [100.0]
    reader = EmbeddedMetrics(lambda: metrics.render().decode(), clock=lambda: t[0])
    since = reader.mark()
    for i in range(10):  # sql's canary fails half its requests; its stable serves 4
        metrics.observe(model="v1", route="canary", seconds=0.2, error=i < 5, workload="sql")
    for _ in range(4):
        metrics.observe(model="v0", route="stable", seconds=0.1, error=False, workload="sql")
    for _ in range(30):  # the shared line's users of the same stable version
        metrics.observe(model="v0", route="stable", seconds=0.1, error=True)
    for voter in range(2):  # one vote per user: two users of sql's canary, seven others'
        metrics.vote(model="v1", value=-1, workload="sql", voter=voter, epoch=())
    for voter in range(7):
        metrics.vote(model="v1", value=1, workload="default", voter=voter, epoch=())
    t[0] = 160.0

    mine = reader.read(candidate="v1", stable="v0", since=since, workload="sql")
    every = reader.read(candidate="v1", stable="v0", since=since)

    assert (mine.candidate.requests, mine.candidate.errors) == (10, 5)
    assert (mine.stable.requests, mine.stable.errors) == (4, 0)
    assert mine.candidate.feedback == {-1: 2.0}
    assert (every.stable.requests, every.stable.errors) == (34, 30)
    assert every.candidate.feedback == {-1: 2.0, 1: 7.0}


class RecordingPrometheus:
    """Answers every query with no series; keeps the queries."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def query(self, expr: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        self.queries.append(expr)
        return []


def test_prometheus_queries_select_the_workloads_series() -> None:
    client = RecordingPrometheus()
    reader = PrometheusMetrics(client, clock=lambda: 1000.0)  # type: ignore[arg-type]
    reader.read(candidate="v1", stable="v0", since=900, workload="sql")
    assert client.queries and all('workload="sql"' in q for q in client.queries)
    client.queries.clear()
    reader.read(candidate="v1", stable="v0", since=900)
    assert client.queries and not any("workload" in q for q in client.queries)


class SeenMetrics:
    """Enough candidate traffic at once; records which workload each read asked for."""

    source = "fake"

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.workloads: list[str | None] = []

    def mark(self) -> float:
        return self.clock.now()

    def read(self, *, workload: str | None = None, **_: float | str) -> CanaryWindow:
        self.workloads.append(workload)
        # the sql line's weight of 10 %: nine stable users for each of the candidate's
        return CanaryWindow(RouteStats(500, 0, 0.1), RouteStats(4500, 0, 0.1), "fake", 60)


def test_a_workloads_canary_step_reads_its_own_metrics(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    save_state(store, RoutingState(stable="v0", workloads={"sql": SQL}))
    clock = FakeClock()
    metrics = SeenMetrics(clock)
    routing = scoped(StoreRouting(store), "sql")

    result = watch_step(
        routing,
        "v1",
        stable="v0",
        metrics=metrics,  # type: ignore[arg-type]
        policy=CFG,
        clock=clock,
    )

    assert result.verdict == "pass"
    assert set(metrics.workloads) == {"sql"}


def test_a_workloads_shadow_phase_pairs_its_own_requests_alone() -> None:
    from datetime import UTC, datetime

    from tasks.release.canary.rollout import shadow_pairs
    from tests.helpers import make_trace

    at = datetime(2026, 1, 1, 10, tzinfo=UTC)
    records = [
        make_trace(1, at, pairing_id="p1", route="stable", workload="sql"),
        make_trace(2, at, pairing_id="p1", route="shadow", model_version="v1", workload="sql"),
        make_trace(3, at, pairing_id="p2", route="stable"),  # the shared line's copy of v1
        make_trace(4, at, pairing_id="p2", route="shadow", model_version="v1"),
    ]

    mine = shadow_pairs(records, candidate="v1", since=at, workload="sql")

    assert [(s.trace_id, c.trace_id) for s, c in mine] == [("trace-00001", "trace-00002")]
    assert len(shadow_pairs(records, candidate="v1", since=at)) == 2
