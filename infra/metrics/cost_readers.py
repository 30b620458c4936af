"""Serving cost read over a window (:mod:`infra.metrics.cost`): :class:`PrometheusCost` queries
``increase`` over the window, :class:`EmbeddedCost` scrapes the gateway (its counters since the
gateway started, or since a :meth:`~EmbeddedCost.mark`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from infra.metrics.cost import CostReader, CostStats, cost_from, sum_by
from infra.metrics.promql_embedded import EmbeddedMetrics, counter_deltas, parse_exposition
from infra.metrics.promql_prometheus import PrometheusClient, escape_label, increase_by


class PrometheusCost:
    """Cost from Prometheus (``increase`` over the window)."""

    source = "prometheus"

    def __init__(self, client: PrometheusClient, *, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.clock = clock

    def read_cost(
        self, version: str, *, since: float, workload: str | None = None, route: str | None = None
    ) -> CostStats:
        """Sums of ``increase`` over the window of each cost series of ``version``."""
        now = self.clock()
        rng = f"[{max(1, math.ceil(now - since))}s]"
        # the gateway's own scrape only (infra.metrics.promql.GATEWAY_JOB)
        labels = {
            "job": "gateway",
            "model": version,
            **({"workload": workload} if workload else {}),
        }
        labels |= {"route": route} if route else {}

        def total(name: str, extra: dict[str, str]) -> float:
            sel = ",".join(f'{k}="{escape_label(v)}"' for k, v in (labels | extra).items())
            return sum(v for _, v in self.client.query(f"sum(increase({name}{{{sel}}}{rng}))", now))

        def by_batch(name: str) -> dict[str, float]:
            sel = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
            return increase_by(self.client, "batch", name, sel, rng, now)

        return cost_from(total, by_batch)


class EmbeddedCost:
    """Cost from the gateway's ``/metrics`` (no Prometheus): a scrape now minus the scrape at
    the last :meth:`mark` at or before the window start, or the counters since the gateway
    started when no mark precedes it."""

    source = "embedded"

    def __init__(self, scrape: Callable[[], str], *, clock: Callable[[], float] = time.time):
        self.scrape = scrape
        self.clock = clock
        self.marks: list[tuple[float, Any]] = []

    def mark(self) -> float:
        """Scrape now and keep it as a window start; returns that time."""
        at = self.clock()
        self.marks.append((at, parse_exposition(self.scrape())))
        return at

    def read_cost(
        self, version: str, *, since: float, workload: str | None = None, route: str | None = None
    ) -> CostStats:
        """The deltas of ``version``'s cost series since the window start."""
        now = parse_exposition(self.scrape())
        before = [s for t, s in self.marks if t <= since]
        base = before[-1] if before else {}
        match = {"model": version, **({"workload": workload} if workload else {})}
        match |= {"route": route} if route else {}

        def total(name: str, extra: dict[str, str]) -> float:
            return sum(counter_deltas(now, base, name, **match, **extra).values())

        def by_batch(name: str) -> dict[str, float]:
            return sum_by(counter_deltas(now, base, name, **match), "batch")

        return cost_from(total, by_batch)


def open_cost_reader(
    *, prometheus_url: str | None, admin_url: str | None, admin_token: str | None = None
) -> CostReader | None:
    """Prometheus when its URL is set, else the gateway's ``/admin/metrics`` (admin listener
    and token); None with neither."""
    if prometheus_url:
        return PrometheusCost(PrometheusClient(prometheus_url))
    if admin_url and admin_token:
        return EmbeddedCost(EmbeddedMetrics.from_url(admin_url, token=admin_token).scrape)
    return None
