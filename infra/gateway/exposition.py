"""What each listener's metrics page shows of the gateway's samples
(:class:`~infra.gateway.metrics.GatewayMetrics`).

The admin listener's ``/admin/metrics`` (bearer token) has every series: Prometheus scrapes it,
since the alert rules read a candidate's shadow errors before any user reaches it, and so does
the embedded canary analysis (:class:`infra.metrics.promql_embedded.EmbeddedMetrics`, with the
admin token). The public listener's ``/metrics`` has no series with a ``route`` label, no
``flywheel_route_weight``, and no series whose ``model`` is not a stable version: whether a
canary runs, which version it is, its weight and how it fares are not the public's to learn (a
client that knew could aim its votes at the canary).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

HIDDEN_FAMILIES = frozenset({"flywheel_route_weight"})  # never on the public /metrics


class PublicOnly(Collector):
    """``source``'s metrics without ``flywheel_route_weight``, without any sample that has a
    ``route`` label, and without the samples whose ``model`` label names a version not in
    ``public`` (the stable versions); samples without a ``model`` label stay."""

    def __init__(self, source: Collector, public: set[str]) -> None:
        self.source = source
        self.public = public

    def collect(self) -> Iterator[Metric]:
        """The filtered metric families."""
        for family in self.source.collect():
            if family.name in HIDDEN_FAMILIES:
                continue
            kept = Metric(family.name, family.documentation, family.type, family.unit)
            kept.samples = [
                s
                for s in family.samples
                if "route" not in s.labels
                and ("model" not in s.labels or s.labels["model"] in self.public)
            ]
            yield kept
