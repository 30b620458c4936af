"""Canary analysis metrics: requests, errors, p99 latency and feedback of the candidate (route
``canary``) and of the stable version (route ``stable``) over one time window, the same for
both: a burst of load during a step slows both versions alike, and stable's history is never
the baseline. Requests, errors and latency are read from the raw series; ``users`` served,
``error_users`` who met an error, and each user's first vote from the gateway's voice series
(:mod:`infra.gateway.voices`): the rails weigh requests by users, the unit they treat as
independent (:mod:`tasks.release.canary.units`).

Two readers behind one interface, :class:`CanaryMetrics`:

- :class:`~infra.metrics.promql_prometheus.PrometheusMetrics` (production,
  ``FLYWHEEL_RELEASE__PROMETHEUS_URL``): instant queries through Prometheus's HTTP API
  (``/api/v1/query``), ``increase(...[<N>s])`` with N the seconds since the window start,
  evaluated now; p99 from the latency buckets' increases with PromQL's ``histogram_quantile``
  interpolation (the buckets are kept for the slow-request test of :mod:`tasks.release.canary.latency`).
- :class:`~infra.metrics.promql_embedded.EmbeddedMetrics` (no Prometheus): scrapes the gateway's own
  ``/admin/metrics`` exposition (admin listener, admin token: the public ``/metrics`` names no
  route). :meth:`~infra.metrics.promql_embedded.EmbeddedMetrics.mark` keeps a scrape as a window
  start; :meth:`~infra.metrics.promql_embedded.EmbeddedMetrics.read` scrapes again and uses the
  deltas (counters now minus counters at the latest mark at or before the window start), and
  computes p99 from the bucket deltas with the same interpolation as PromQL's
  ``histogram_quantile``. A counter lower than at the mark means the gateway restarted: its current
  value is taken as the delta. One gateway replica only: with several, run
  Prometheus.

Both readers report what they did not see as zero requests, never as a pass: the release's
no-data rule decides what too few requests mean. Given a ``workload``, both read only the
series of that workload's own release line (the gateway's ``workload`` label): its canary
against its stable version as its own users were served, never another workload's traffic.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from infra.metrics.cost import CostStats

log = logging.getLogger(__name__)

REQUESTS = "agent_requests_total"
ERRORS = "agent_errors_total"
LATENCY_BUCKETS = "agent_latency_seconds_bucket"
USERS = "agent_voices_total"
ERROR_USERS = "agent_error_voices_total"
SLOW_USERS = "agent_slow_voices_total"  # users with a request slower than its ``over`` bound
FEEDBACK = "user_feedback_voices_total"
QUANTILE = 0.99
# the gateway's own scrape: a series any other job (the Pushgateway, anything on the network
# that can push) carries under these names decides nothing
GATEWAY_JOB = 'job="gateway"'


@dataclass
class RouteStats:
    """What one version did on one route during a window (counts may be fractional:
    Prometheus extrapolates ``increase``)."""

    requests: float = 0.0
    errors: float = 0.0
    p99_s: float | None = None
    # each user's first vote in the step: value (+1/0/-1) -> users
    feedback: dict[int, float] = field(default_factory=dict)
    # latency histogram: requests at or under each bucket bound (``le``, +Inf the last)
    latency_buckets: dict[float, float] = field(default_factory=dict)
    users: float = math.nan  # users served (the voice series); unset: one user per request
    error_users: float = math.nan  # users who met an error; unset: one per error
    cost: CostStats | None = None  # what its answered requests cost (infra.metrics.cost)
    # users who had a request slower than each bound (``over``); empty: the gateway counted none
    slow_users: dict[float, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if math.isnan(self.users):
            self.users = self.requests
        if math.isnan(self.error_users):
            self.error_users = self.errors

    @property
    def error_ratio(self) -> float | None:
        """The share of users who met an error (one user, one voice), None when no user was
        served."""
        return self.error_users / self.users if self.users > 0 else None

    @property
    def feedback_count(self) -> float:
        """The number of feedback events, whatever their value."""
        return sum(self.feedback.values())

    @property
    def feedback_score(self) -> float | None:
        """Mean feedback on the reward's scale: thumbs up 1, neutral 0.5, down 0."""
        n = self.feedback_count
        if n <= 0:
            return None
        up, neutral = self.feedback.get(1, 0.0), self.feedback.get(0, 0.0)
        return (up + 0.5 * neutral) / n

    def as_dict(self) -> dict[str, Any]:
        """The stats as JSON-ready values, with the error ratio and feedback score (without the
        latency histogram)."""
        data = asdict(self)
        data.pop("latency_buckets")
        data.pop("slow_users")
        data["feedback"] = {str(k): v for k, v in self.feedback.items()}
        data.update(error_ratio=self.error_ratio, feedback_score=self.feedback_score)
        return data


@dataclass
class CanaryWindow:
    """The candidate's and the stable version's stats, and where they came from."""

    candidate: RouteStats
    stable: RouteStats
    source: str  # "prometheus" | "embedded"
    window_s: float  # both versions over the same interval, this long


class CanaryMetrics(Protocol):
    """Where canary analysis reads each version's request, error, latency and feedback stats."""

    source: str

    def mark(self) -> float:
        """Note now as a window start (call when a step starts); returns that time, to pass
        as ``*_since`` to :meth:`read`."""
        ...

    def read(
        self, *, candidate: str, stable: str, since: float, workload: str | None = None
    ) -> CanaryWindow:
        """Stats of ``candidate`` on the canary route and of ``stable`` on the stable route over
        the same window, ``since`` (unix seconds) until now; ``workload``: that workload's
        requests only (None: every workload's).

        Raises:
            MetricsError: the metrics could not be read.
        """
        ...


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """PromQL's ``histogram_quantile`` over cumulative bucket counts by upper bound (``le``);
    None when there are no observations."""
    bounds = sorted(buckets)
    if len(bounds) < 2 or not math.isinf(bounds[-1]) or buckets[bounds[-1]] <= 0:
        return None
    counts = [buckets[b] for b in bounds]
    rank = q * counts[-1]
    i = next(i for i, c in enumerate(counts) if c >= rank)
    if i == len(bounds) - 1:
        return bounds[-2]
    lower, below = (0.0, 0.0) if i == 0 else (bounds[i - 1], counts[i - 1])
    if i == 0 and bounds[0] <= 0:
        return bounds[0]
    inside = counts[i] - below
    return bounds[i] if inside <= 0 else lower + (bounds[i] - lower) * (rank - below) / inside
