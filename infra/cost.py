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

:class:`CostReader` is read like the canary's :class:`~infra.promql.CanaryMetrics`, which
reads the same series for both versions of a step; the standalone readers (Prometheus, or the
gateway's ``/metrics``) are in :mod:`infra.cost_readers`.
"""

from __future__ import annotations

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
