"""The embedded reader of :mod:`infra.metrics.promql` (no Prometheus): :class:`EmbeddedMetrics`
scrapes the gateway's own ``/admin/metrics`` exposition, keeps a scrape at each window start and
reads the counters' deltas since (:func:`route_stats`, :func:`counter_deltas`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from infra.errors import MetricsError
from infra.http import tls
from infra.metrics.cost import cost_from, sum_by
from infra.metrics.promql import (
    ERROR_USERS,
    ERRORS,
    FEEDBACK,
    LATENCY_BUCKETS,
    QUANTILE,
    REQUESTS,
    SLOW_USERS,
    USERS,
    CanaryWindow,
    RouteStats,
    histogram_quantile,
)

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class EmbeddedMetrics:
    """Canary stats from the gateway's own ``/metrics`` (no Prometheus): the difference between a
    scrape at each :meth:`mark` and a scrape at :meth:`read`."""

    source = "embedded"

    def __init__(self, scrape: Callable[[], str], *, clock: Callable[[], float] = time.time):
        self.scrape = scrape
        self.clock = clock
        self.snapshots: list[tuple[float, Series]] = []

    @classmethod
    def from_url(
        cls, gateway_url: str, *, token: str | None = None, timeout_s: float = 5.0
    ) -> EmbeddedMetrics:
        """Scrape the admin listener's ``<gateway_url>/admin/metrics`` with the admin
        ``token`` (every series), or without one the public ``<gateway_url>/metrics`` (no
        route-labelled series), over HTTP (a failed scrape raises ``MetricsError``)."""
        url = gateway_url.rstrip("/") + ("/admin/metrics" if token else "/metrics")
        headers = {"Authorization": f"Bearer {token}"} if token else {}

        def scrape() -> str:
            try:
                resp = httpx.get(url, timeout=timeout_s, headers=headers, verify=tls())
                resp.raise_for_status()
            except httpx.HTTPError as exc:
                raise MetricsError(f"cannot scrape {url}: {type(exc).__name__}") from exc
            return resp.text

        return cls(scrape)

    def mark(self) -> float:
        """Scrape ``/metrics`` now and keep the samples as a window start; returns that time."""
        series = parse_exposition(self.scrape())
        at = self.clock()
        self.snapshots.append((at, series))
        return at

    def read(
        self, *, candidate: str, stable: str, since: float, workload: str | None = None
    ) -> CanaryWindow:
        """Stats of ``candidate`` on the canary route and of ``stable`` on the stable route: a
        scrape now minus the last :meth:`mark` at or before ``since``, the same for both
        (``workload``: its series only). Raises ``MetricsError`` when a scrape fails or no mark
        precedes ``since``."""
        now, current = self.clock(), parse_exposition(self.scrape())
        start = self._at(since)
        return CanaryWindow(
            candidate=route_stats(current, start, candidate, "canary", workload=workload),
            stable=route_stats(current, start, stable, "stable", workload=workload),
            source=self.source,
            window_s=now - since,
        )

    def _at(self, since: float) -> Series:
        before = [s for t, s in self.snapshots if t <= since]
        if not before:
            raise MetricsError("no /metrics snapshot at the window start (call mark() first)")
        return before[-1]


def parse_exposition(text: str) -> Series:
    """The samples of a Prometheus text exposition by (name, sorted labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    series: Series = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                series[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    except ValueError as exc:
        raise MetricsError(f"the /metrics exposition does not parse: {exc}") from exc
    return series


def counter_deltas(
    now: Series, base: Series, name: str, **match: str
) -> dict[tuple[tuple[str, str], ...], float]:
    """Each series of ``name`` whose labels match ``match``: its value in ``now`` less its value
    in ``base`` (the whole value when lower: the counter was reset)."""
    out = {}
    for (sname, labels), value in now.items():
        if sname != name or any(dict(labels).get(k) != v for k, v in match.items()):
            continue
        start = base.get((sname, labels), 0.0)
        out[labels] = value - start if value >= start else value  # lower: counter reset
    return out


def route_stats(
    now: Series, base: Series, model: str, route: str, *, workload: str | None = None
) -> RouteStats:
    """The deltas between two scrapes for one version on one route (``workload``: the series
    of that workload's release line only)."""
    mine = {"workload": workload} if workload else {}
    latency = counter_deltas(now, base, LATENCY_BUCKETS, model=model, route=route, **mine)
    buckets = {float(le): n for le, n in sum_by(latency, "le").items()}
    votes = sum_by(counter_deltas(now, base, FEEDBACK, model=model, **mine), "value")
    slow = sum_by(counter_deltas(now, base, SLOW_USERS, model=model, route=route, **mine), "over")
    feedback = {int(value): n for value, n in votes.items()}

    def total(name: str, extra: dict[str, str] | None = None) -> float:
        match = {**mine, **(extra or {})}
        return sum(counter_deltas(now, base, name, model=model, route=route, **match).values())

    def by_batch(name: str) -> dict[str, float]:
        return sum_by(counter_deltas(now, base, name, model=model, route=route, **mine), "batch")

    return RouteStats(
        requests=total(REQUESTS),
        errors=total(ERRORS),
        users=total(USERS),
        error_users=total(ERROR_USERS),
        p99_s=histogram_quantile(QUANTILE, buckets),
        feedback={k: v for k, v in feedback.items() if v > 0},
        latency_buckets=buckets,
        slow_users={float(over): n for over, n in slow.items()},
        cost=cost_from(total, by_batch),
    )
