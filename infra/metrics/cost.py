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

A model server that batches makes each answer cheaper the more answers share its batch, and a
version serving a tenth of the traffic forms smaller batches than one serving the rest: its
compute per request is higher for that alone. Requests and compute are therefore also counted
by ``batch`` (:func:`batch_bucket`: how many answers were generated together), and a candidate
is compared with stable at the same batch sizes (:func:`matched_compute_ratio`).

:class:`CostReader` is read like the canary's :class:`~infra.metrics.promql.CanaryMetrics`, which
reads the same series for both versions of a step; the standalone readers (Prometheus, or the
gateway's ``/metrics``) are in :mod:`infra.metrics.cost_readers`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

COST_REQUESTS = "agent_cost_requests_total"
TOKENS = "agent_tokens_total"
COMPUTE = "agent_compute_seconds_total"
# the ``batch`` label's buckets (answers generated together); "none": the server did not say
BATCH_BUCKETS = ((1, "1"), (2, "2"), (4, "3-4"), (8, "5-8"), (16, "9-16"))
NO_BATCH = "none"


def batch_bucket(size: int | None) -> str:
    """The ``batch`` label of an answer generated with ``size - 1`` others."""
    if size is None or size < 1:
        return NO_BATCH
    return next((name for top, name in BATCH_BUCKETS if size <= top), "17+")


@dataclass
class CostStats:
    """What one version's answered requests cost over a window."""

    requests: float = 0.0
    tokens_in: float = 0.0
    tokens_out: float = 0.0
    compute_s: float = 0.0
    price_per_1k_tokens: float | None = None
    # batch bucket -> (requests, compute seconds); "none" (no batch reported) left out
    by_batch: dict[str, tuple[float, float]] = field(default_factory=dict)

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

    def since(self, earlier: CostStats) -> CostStats:
        """What was counted between ``earlier`` and this reading of the same window start
        (never below zero: Prometheus's extrapolated ``increase`` can dip between looks)."""
        batches = {
            b: (
                max(0.0, n - earlier.by_batch.get(b, (0.0, 0.0))[0]),
                max(0.0, c - earlier.by_batch.get(b, (0.0, 0.0))[1]),
            )
            for b, (n, c) in self.by_batch.items()
        }
        return CostStats(
            requests=max(0.0, self.requests - earlier.requests),
            tokens_in=max(0.0, self.tokens_in - earlier.tokens_in),
            tokens_out=max(0.0, self.tokens_out - earlier.tokens_out),
            compute_s=max(0.0, self.compute_s - earlier.compute_s),
            price_per_1k_tokens=self.price_per_1k_tokens,
            by_batch={b: v for b, v in batches.items() if v[0] > 0},
        )


def cost_from(
    total: Callable[[str, dict[str, str]], float],
    by_batch: Callable[[str], dict[str, float]] | None = None,
) -> CostStats:
    """The stats from ``total(series, extra labels)``, one reader's sum over a window, and
    ``by_batch(series)``, its sums by ``batch`` label."""
    batches: dict[str, tuple[float, float]] = {}
    if by_batch is not None:
        requests, compute = by_batch(COST_REQUESTS), by_batch(COMPUTE)
        batches = {
            b: (n, compute.get(b, 0.0)) for b, n in requests.items() if b != NO_BATCH and n > 0
        }
    return CostStats(
        requests=total(COST_REQUESTS, {}),
        tokens_in=total(TOKENS, {"direction": "in"}),
        tokens_out=total(TOKENS, {"direction": "out"}),
        compute_s=total(COMPUTE, {}),
        by_batch=batches,
    )


def sum_by(deltas: dict[tuple[tuple[str, str], ...], float], label: str) -> dict[str, float]:
    """``deltas`` summed by the value of ``label`` (series without it left out)."""
    out: dict[str, float] = {}
    for labels, delta in deltas.items():
        if (value := dict(labels).get(label)) is not None:
            out[value] = out.get(value, 0.0) + delta
    return out


@dataclass(frozen=True)
class MatchedCompute:
    """A candidate's compute per request against stable's at the same batch sizes."""

    ratio: float  # candidate / stable, each batch bucket weighted by the candidate's requests
    candidate_s: float  # the candidate's compute per request in the matched buckets
    stable_s: float  # stable's, reweighted to the candidate's mix of batch sizes
    coverage: float  # the share of the candidate's requests in buckets stable also has


def matched_compute_ratio(
    candidate: CostStats, stable: CostStats, *, min_coverage: float = 0.5
) -> MatchedCompute | None:
    """The candidate's compute per request over stable's, bucket by bucket of batch size
    (stable's per-request compute in each bucket weighted by the candidate's requests there),
    so neither side is charged for the batches its share of the traffic forms. None when the
    buckets with requests on both sides hold less than ``min_coverage`` of the candidate's
    requests (then only the comparison over all requests is fair to make)."""
    shared = [b for b in candidate.by_batch if b in stable.by_batch and stable.by_batch[b][0] > 0]
    n = sum(candidate.by_batch[b][0] for b in shared)
    if n <= 0:
        return None
    cand = sum(candidate.by_batch[b][1] for b in shared) / n
    stab = (
        sum(
            candidate.by_batch[b][0] * stable.by_batch[b][1] / stable.by_batch[b][0] for b in shared
        )
        / n
    )
    if stab <= 0:
        return None
    coverage = n / sum(r for r, _ in candidate.by_batch.values())
    if coverage < min_coverage:
        return None
    return MatchedCompute(ratio=cand / stab, candidate_s=cand, stable_s=stab, coverage=coverage)


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
