"""The canary's metrics reader chosen from the settings: Prometheus in production, else the
gateway's own exposition (:mod:`infra.metrics.promql` says what each reads)."""

from __future__ import annotations

from infra.errors import ConfigError
from infra.metrics.promql import CanaryMetrics
from infra.metrics.promql_embedded import EmbeddedMetrics
from infra.metrics.promql_prometheus import PrometheusClient, PrometheusMetrics


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
