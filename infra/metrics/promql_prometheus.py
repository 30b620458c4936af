"""The production reader of :mod:`infra.metrics.promql`: :class:`PrometheusMetrics`, instant queries
through Prometheus's HTTP API (:class:`PrometheusClient`), ``increase(...[<N>s])`` over each
window, p99 from the latency buckets' increases
(:func:`infra.metrics.promql.histogram_quantile`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx

from infra.errors import MetricsError, redact_url
from infra.http import tls
from infra.metrics.cost import cost_from
from infra.metrics.promql import (
    ERROR_USERS,
    ERRORS,
    FEEDBACK,
    GATEWAY_JOB,
    LATENCY_BUCKETS,
    QUANTILE,
    REQUESTS,
    SLOW_USERS,
    USERS,
    CanaryWindow,
    RouteStats,
    histogram_quantile,
)


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
        mine = f',workload="{escape_label(workload)}"' if workload else ""
        sel = f'{GATEWAY_JOB},model="{escape_label(model)}",route="{route}"{mine}'
        rng = f"[{max(1, math.ceil(seconds))}s]"
        q = self.client.query
        buckets = {
            float(labels["le"]): v
            for labels, v in q(f"sum by (le) (increase({LATENCY_BUCKETS}{{{sel}}}{rng}))", now)
            if "le" in labels and math.isfinite(v)
        }  # PromQL's histogram_quantile over these is histogram_quantile below
        fb_sel = f'{GATEWAY_JOB},model="{escape_label(model)}"{mine}'
        feedback = increase_by(self.client, "value", FEEDBACK, fb_sel, rng, now)
        slow = increase_by(self.client, "over", SLOW_USERS, sel, rng, now)

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
            slow_users={float(over): v for over, v in slow.items() if math.isfinite(v)},
            cost=cost_from(
                cost_total, partial(increase_by, self.client, "batch", sel=sel, rng=rng, at=now)
            ),
        )


def escape_label(value: str) -> str:
    """``value`` as a PromQL label value between double quotes (backslashes and quotes
    escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')
