"""The release benchmark's Prometheus path (tests/benchmarks/release_prom.py) reads what the
gateway counted: the exposition backfilled as OpenMetrics, queried by the production reader,
gives the same window as the exact counters (up to ``increase()``'s extrapolation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.metrics.promql_embedded import parse_exposition, route_stats
from infra.metrics.promql_prometheus import PrometheusMetrics
from tests.benchmarks.release_prom import BASE, Release, alerts_over, prometheus_over
from tests.benchmarks.release_world import Load, Names, Population, Version, World

pytestmark = pytest.mark.integration


def _world(cand: Version) -> World:
    steady = Load(rate=4.0, burst_rate=1.0, burst_slowdown=1.0)
    world = World(
        Population(clients=200, load=steady),
        cand,
        seed=3,
        record=True,
        names=Names("s0", "c0", "w0", "r0"),
    )
    world.state = world.state.model_copy(update={"phase": "canary", "weight": 50.0, "step": 2})
    world.advance(900)
    return world


def test_prometheus_reads_the_gateways_counters_over_a_window(tmp_path: Path) -> None:
    world = _world(Version())
    with prometheus_over([Release(world)], tmp_path) as client:
        reader = PrometheusMetrics(client, clock=lambda: BASE + 600.0)  # type: ignore[arg-type]
        window = reader.read(candidate="c0", stable="s0", since=BASE + 300.0, workload="w0")
    scrapes = {t: parse_exposition("\n".join(lines) + "\n") for t, lines in world.scrapes}
    for got, route, model in ((window.candidate, "canary", "c0"), (window.stable, "stable", "s0")):
        exact = route_stats(scrapes[600], scrapes[300], model, route, workload="w0")
        assert exact.requests > 400
        assert got.requests == pytest.approx(exact.requests, rel=0.1)
        assert got.users == pytest.approx(exact.users, rel=0.1)
        assert got.error_users == pytest.approx(exact.error_users, abs=max(3, exact.error_users))
        # the p99 rail's unit: users slower than each bound (the ``over`` label), as counted
        assert sum(exact.slow_users.values()) > 50
        for bound, users in exact.slow_users.items():
            assert got.slow_users.get(bound, 0.0) == pytest.approx(users, rel=0.15, abs=2)


def test_a_candidate_with_10x_the_errors_fires_the_error_alert(tmp_path: Path) -> None:
    """rules.yml evaluated over the backfilled data (and its recording rules, where it has
    them) names the candidate and its workload."""
    world = _world(Version(errors=10.0))
    fires = alerts_over([Release(world)], tmp_path, 900)
    assert ("c0", "w0") in fires, fires
    assert fires[("c0", "w0")][1] == "CandidateModelRegression"
