"""Metrics: what the stages push and what the release reads back from the gateway's series.
The stage metrics folded across runs and pushed to the Pushgateway
(:mod:`infra.metrics.stage`); the canary's requests, errors, latency and feedback per route over
a window (:mod:`infra.metrics.promql`), read from Prometheus
(:mod:`infra.metrics.promql_prometheus`) or from the gateway's own exposition
(:mod:`infra.metrics.promql_embedded`), the reader chosen from the settings
(:mod:`infra.metrics.canary_metrics`); and the measured serving cost per version
(:mod:`infra.metrics.cost`) with its two readers (:mod:`infra.metrics.cost_readers`)."""
