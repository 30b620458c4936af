"""Canary analysis metrics: requests, errors, p99 latency and feedback of the candidate (route
``canary``) and of the stable version (route ``stable``) over one time window, the same for
both: a burst of load during a step slows both versions alike, and stable's history is never
the baseline. Requests, errors and latency are read from the raw series; ``users`` served,
``error_users`` who met an error, and each user's first vote from the gateway's voice series
(:mod:`infra.gateway.voices`): the rails weigh requests by users, the unit they treat as
independent (:mod:`tasks.release.units`).

Two readers behind one interface, :class:`CanaryMetrics`:

- :class:`PrometheusMetrics` (production, ``FLYWHEEL_RELEASE__PROMETHEUS_URL``): instant
  queries through Prometheus's HTTP API (``/api/v1/query``), ``increase(...[<N>s])`` with N the
  seconds since the window start, evaluated now; p99 from the latency buckets' increases with
  PromQL's ``histogram_quantile`` interpolation (the buckets are kept for the slow-request
  test of :mod:`tasks.release.latency`).
- :class:`EmbeddedMetrics` (no Prometheus): scrapes the gateway's own ``/admin/metrics``
  exposition (admin listener, admin token: the public ``/metrics`` names no route).
  :meth:`~EmbeddedMetrics.mark` keeps a scrape as a window start; :meth:`read` scrapes again
  and uses the deltas (counters now minus counters at the latest mark at or before the window
  start), and computes p99 from the bucket deltas with the same interpolation as
  PromQL's ``histogram_quantile``. A counter lower than at the mark means the gateway
  restarted: its current value is taken as the delta. One gateway replica only: with several,
  run Prometheus.

Both readers report what they did not see as zero requests, never as a pass: the release's
no-data rule decides what too few requests mean. Given a ``workload``, both read only the
series of that workload's own release line (the gateway's ``workload`` label): its canary
against its stable version as its own users were served, never another workload's traffic.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Protocol

import httpx

from infra.cost import CostStats, cost_from, sum_by
from infra.errors import ConfigError, MetricsError, redact_url
from infra.http import tls

log = logging.getLogger(__name__)

REQUESTS = "agent_requests_total"
ERRORS = "agent_errors_total"
LATENCY_BUCKETS = "agent_latency_seconds_bucket"
USERS = "agent_voices_total"
ERROR_USERS = "agent_error_voices_total"
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
    cost: CostStats | None = None  # what its answered requests cost (infra.cost)

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


def open_canary_metrics(
    *, prometheus_url: str | None, admin_url: str | None, admin_token: str | None = None
) -> CanaryMetrics:
    """Prometheus when its URL is set, else the gateway's ``/admin/metrics`` on its admin
    listener (embedded mode; the public ``/metrics`` names no route).

    Raises:
        ConfigError: neither is set (or the admin listener without its token).
    """
    if prometheus_url:
        return PrometheusMetrics(PrometheusClient(prometheus_url))
    if admin_url and admin_token:
        return EmbeddedMetrics.from_url(admin_url, token=admin_token)
    raise ConfigError(
        "canary analysis needs metrics: set FLYWHEEL_RELEASE__PROMETHEUS_URL, or "
        "FLYWHEEL_GATEWAY__URL and FLYWHEEL_GATEWAY__ADMIN_TOKEN to read the gateway's "
        "/admin/metrics directly"
    )


# ---- Prometheus -----------------------------------------------------------------------------


class PrometheusClient:
    """Instant queries against Prometheus's HTTP API."""

    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def query(self, expr: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        """``(labels, value)`` per series of an instant vector (NaN values left out).

        Raises:
            MetricsError: Prometheus is unreachable or rejected the query.
        """
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        try:
            resp = httpx.get(
                f"{self.url}/api/v1/query", params=params, timeout=self.timeout_s, verify=tls()
            )
            body = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise MetricsError(
                f"Prometheus at {redact_url(self.url)}: {type(exc).__name__}"
            ) from exc
        if resp.status_code != 200 or body.get("status") != "success":
            raise MetricsError(f"Prometheus query failed ({resp.status_code}): {body.get('error')}")
        return instant_rows(body["data"])


def instant_rows(data: dict[str, Any]) -> list[tuple[dict[str, str], float]]:
    """``(labels, value)`` per series of an instant query's ``data`` (a vector or a scalar; NaN
    values left out)."""
    rows: list[tuple[dict[str, str], float]]
    if data["resultType"] == "scalar":
        rows = [({}, float(data["result"][1]))]
    else:
        rows = [(dict(r["metric"]), float(r["value"][1])) for r in data["result"]]
    return [(labels, v) for labels, v in rows if not math.isnan(v)]


def increase_by(
    client: PrometheusClient, label: str, name: str, sel: str, rng: str, at: float
) -> dict[str, float]:
    """``increase`` of ``name{sel}`` over ``rng`` summed by ``label``'s values."""
    rows = client.query(f"sum by ({label}) (increase({name}{{{sel}}}{rng}))", at)
    return {labels[label]: v for labels, v in rows if label in labels}


class PrometheusMetrics:
    """Canary stats from Prometheus queries (``increase`` over each window)."""

    source = "prometheus"

    def __init__(self, client: PrometheusClient, *, clock: Callable[[], float] = time.time):
        self.client = client
        self.clock = clock

    def mark(self) -> float:
        """Return now; nothing to record, as Prometheus keeps the history itself."""
        return self.clock()

    def read(
        self, *, candidate: str, stable: str, since: float, workload: str | None = None
    ) -> CanaryWindow:
        """Stats of ``candidate`` on the canary route and of ``stable`` on the stable route over
        the same window from Prometheus (``workload``: its series only). Raises
        ``MetricsError`` when a query fails."""
        now = self.clock()
        return CanaryWindow(
            candidate=self._route(candidate, "canary", now - since, now, workload),
            stable=self._route(stable, "stable", now - since, now, workload),
            source=self.source,
            window_s=now - since,
        )

    def _route(
        self, model: str, route: str, seconds: float, now: float, workload: str | None
    ) -> RouteStats:
        mine = f',workload="{_escape(workload)}"' if workload else ""
        sel = f'{GATEWAY_JOB},model="{_escape(model)}",route="{route}"{mine}'
        rng = f"[{max(1, math.ceil(seconds))}s]"
        q = self.client.query
        buckets = {
            float(labels["le"]): v
            for labels, v in q(f"sum by (le) (increase({LATENCY_BUCKETS}{{{sel}}}{rng}))", now)
            if "le" in labels and math.isfinite(v)
        }  # PromQL's histogram_quantile over these is histogram_quantile below
        fb_sel = f'{GATEWAY_JOB},model="{_escape(model)}"{mine}'
        feedback = increase_by(self.client, "value", FEEDBACK, fb_sel, rng, now)

        def total(name: str, extra: str = "") -> float:
            return sum(v for _, v in q(f"sum(increase({name}{{{sel}{extra}}}{rng}))", now))

        def cost_total(name: str, extra: dict[str, str]) -> float:
            return total(name, "".join(f',{k}="{v}"' for k, v in extra.items()))

        return RouteStats(
            requests=total(REQUESTS),
            errors=total(ERRORS),
            users=total(USERS),
            error_users=total(ERROR_USERS),
            p99_s=histogram_quantile(QUANTILE, buckets),
            feedback={int(value): v for value, v in feedback.items()},
            latency_buckets=buckets,
            cost=cost_from(
                cost_total, partial(increase_by, self.client, "batch", sel=sel, rng=rng, at=now)
            ),
        )


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


# ---- embedded: the gateway's /metrics ------------------------------------------------------

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


def _deltas(
    now: Series, base: Series, name: str, **match: str
) -> dict[tuple[tuple[str, str], ...], float]:
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
    latency = _deltas(now, base, LATENCY_BUCKETS, model=model, route=route, **mine)
    buckets = {float(le): n for le, n in sum_by(latency, "le").items()}
    votes = sum_by(_deltas(now, base, FEEDBACK, model=model, **mine), "value")
    feedback = {int(value): n for value, n in votes.items()}

    def total(name: str, extra: dict[str, str] | None = None) -> float:
        match = {**mine, **(extra or {})}
        return sum(_deltas(now, base, name, model=model, route=route, **match).values())

    def by_batch(name: str) -> dict[str, float]:
        return sum_by(_deltas(now, base, name, model=model, route=route, **mine), "batch")

    return RouteStats(
        requests=total(REQUESTS),
        errors=total(ERRORS),
        users=total(USERS),
        error_users=total(ERROR_USERS),
        p99_s=histogram_quantile(QUANTILE, buckets),
        feedback={k: v for k, v in feedback.items() if v > 0},
        latency_buckets=buckets,
        cost=cost_from(total, by_batch),
    )


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
