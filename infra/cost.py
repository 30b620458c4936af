"""Serving cost, measured: what the gateway counted for a version (its requests with an
answer, tokens in and out, and the model server's compute seconds), per 1,000 requests, over a
window, from Prometheus or from the gateway's own ``/metrics``.

The gateway's series (:class:`infra.gateway.metrics.GatewayMetrics`), each with ``model``,
``route`` and ``workload``: ``agent_cost_requests_total`` (answered requests),
``agent_tokens_total{direction="in"|"out"}`` and ``agent_compute_seconds_total``. Compute is
what the model server measured for the answer: the in-process model's share of the batch that
generated it (the lock held, no queueing; its thread's CPU time when it generates on one CPU
thread); for an HTTP upstream (vLLM), which reports no compute time, the seconds of the call.
A price per 1,000 tokens (``FLYWHEEL_COST__PRICE_PER_1K_TOKENS``, per version) turns tokens
into money where one is configured; the release's "cheaper" is the measured compute.

:class:`CostReader` is read like the canary's :class:`~infra.promql.CanaryMetrics`:
:class:`PrometheusCost` queries ``increase`` over the window, :class:`EmbeddedCost` scrapes the
gateway (its counters since the gateway started, or since a :meth:`~EmbeddedCost.mark`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

COST_REQUESTS = "agent_cost_requests_total"
TOKENS = "agent_tokens_total"
COMPUTE = "agent_compute_seconds_total"


@dataclass
class CostStats:
    """What one version's answered requests cost over a window."""

    requests: float = 0.0
    tokens_in: float = 0.0
    tokens_out: float = 0.0
    compute_s: float = 0.0
    price_per_1k_tokens: float | None = None

    def per_1k_requests(self) -> dict[str, float | None]:
        """Tokens, compute seconds and (priced) money per 1,000 requests; None without
        requests (never a made-up zero)."""
        if self.requests <= 0:
            return {"tokens": None, "compute_s": None, "price": None}
        k = 1000 / self.requests
        tokens = (self.tokens_in + self.tokens_out) * k
        price = self.price_per_1k_tokens
        return {
            "tokens": tokens,
            "compute_s": self.compute_s * k,
            "price": None if price is None else tokens / 1000 * price,
        }

    @property
    def compute_per_request_s(self) -> float | None:
        """Measured compute seconds per answered request (None: no request)."""
        return self.compute_s / self.requests if self.requests > 0 else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with the per-1,000-requests figures."""
        return {**asdict(self), "per_1k_requests": self.per_1k_requests()}


def cost_from(total: Callable[[str, dict[str, str]], float]) -> CostStats:
    """The stats from ``total(series, extra labels)``: one reader's sum over a window."""
    return CostStats(
        requests=total(COST_REQUESTS, {}),
        tokens_in=total(TOKENS, {"direction": "in"}),
        tokens_out=total(TOKENS, {"direction": "out"}),
        compute_s=total(COMPUTE, {}),
    )


def describe(stats: CostStats | None) -> str:
    """Cost per 1,000 requests in words (the status line and the summaries)."""
    if stats is None or stats.requests <= 0:
        return "no requests measured"
    k = stats.per_1k_requests()
    text = f"{k['compute_s']:.2f} s compute, {k['tokens']:,.0f} tokens per 1k requests"
    if k["price"] is not None:
        text += f", {k['price']:.4g} priced"
    return text + f" (over {stats.requests:.0f})"


class CostReader(Protocol):
    """Where cost is read: one version's answered requests over a window."""

    source: str

    def read_cost(
        self, version: str, *, since: float, workload: str | None = None, route: str | None = None
    ) -> CostStats:
        """``version``'s cost from ``since`` (unix seconds) until now (``workload``, ``route``:
        only those series; None: all).

        Raises:
            MetricsError: the metrics could not be read.
        """
        ...


class PrometheusCost:
    """Cost from Prometheus (``increase`` over the window)."""

    source = "prometheus"

    def __init__(self, client: Any, *, clock: Callable[[], float] = time.time) -> None:
        self.client = client  # infra.promql.PrometheusClient
        self.clock = clock

    def read_cost(
        self, version: str, *, since: float, workload: str | None = None, route: str | None = None
    ) -> CostStats:
        """Sums of ``increase`` over the window of each cost series of ``version``."""
        now = self.clock()
        rng = f"[{max(1, math.ceil(now - since))}s]"
        labels = {"model": version, **({"workload": workload} if workload else {})}
        labels |= {"route": route} if route else {}

        def total(name: str, extra: dict[str, str]) -> float:
            sel = ",".join(f'{k}="{_escape(v)}"' for k, v in (labels | extra).items())
            return sum(v for _, v in self.client.query(f"sum(increase({name}{{{sel}}}{rng}))", now))

        return cost_from(total)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


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
        from infra.promql import parse_exposition

        at = self.clock()
        self.marks.append((at, parse_exposition(self.scrape())))
        return at

    def read_cost(
        self, version: str, *, since: float, workload: str | None = None, route: str | None = None
    ) -> CostStats:
        """The deltas of ``version``'s cost series since the window start."""
        from infra.promql import _deltas, parse_exposition

        now = parse_exposition(self.scrape())
        before = [s for t, s in self.marks if t <= since]
        base = before[-1] if before else {}
        match = {"model": version, **({"workload": workload} if workload else {})}
        match |= {"route": route} if route else {}

        def total(name: str, extra: dict[str, str]) -> float:
            return sum(_deltas(now, base, name, **match, **extra).values())

        return cost_from(total)


def open_cost_reader(*, prometheus_url: str | None, gateway_url: str | None) -> CostReader | None:
    """Prometheus when its URL is set, else the gateway's ``/metrics``; None with neither."""
    if prometheus_url:
        from infra.promql import PrometheusClient

        return PrometheusCost(PrometheusClient(prometheus_url))
    if gateway_url:
        from infra.promql import EmbeddedMetrics

        return EmbeddedCost(EmbeddedMetrics.from_url(gateway_url).scrape)
    return None
