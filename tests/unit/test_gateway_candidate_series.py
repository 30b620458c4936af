"""A candidate's series exist at 0 from the moment the routing state names it, before its first
request: Prometheus's ``increase()`` never counts a series' first sample, so a candidate whose
error counter appeared with its first error would have that error missed by the alert rules.
The public ``/metrics`` still names no version no public client was routed to."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from infra.gateway.cohorts import StateWatcher
from infra.gateway.metrics import GatewayMetrics
from infra.routing import RoutingState, save_state
from infra.routing.state import WorkloadRelease
from infra.store import LocalStore

SERIES = (
    "agent_requests_total",
    "agent_errors_total",
    "agent_voices_total",
    "agent_error_voices_total",
    "agent_latency_seconds_count",
)


def exposed(metrics: GatewayMetrics, *, public: bool = False) -> dict[tuple, float]:
    """(sample name, sorted labels) -> value, as a scrape of the exposition reads it."""
    text = metrics.render(public=public).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def watched(tmp_path: Path, state: RoutingState) -> GatewayMetrics:
    """The gateway's metrics after its state watcher read ``state`` from the store."""
    store = LocalStore(tmp_path / "store")
    metrics = GatewayMetrics()
    watcher = StateWatcher(store, on_change=metrics.set_routing)
    metrics.set_routing(watcher.state)
    save_state(store, state, force=True)
    assert watcher.refresh()
    return metrics


def test_a_named_candidate_is_exposed_at_zero_before_any_request(tmp_path: Path) -> None:
    sql = WorkloadRelease(candidate="sql-2", phase="canary", weight=25)
    state = RoutingState(stable="v0", candidate="v1", phase="canary", weight=5)
    metrics = watched(tmp_path, state.model_copy(update={"workloads": {"sql": sql}}))
    series = exposed(metrics)
    for model, workload in (("v1", "default"), ("sql-2", "sql")):
        for route in ("canary", "shadow"):
            labels = {"model": model, "route": route, "workload": workload}
            for name in SERIES:
                assert series[(name, tuple(sorted(labels.items())))] == 0, (name, labels)
            bucket = {**labels, "le": "+Inf"}
            assert series[("agent_latency_seconds_bucket", tuple(sorted(bucket.items())))] == 0
        for value in ("1", "0", "-1"):
            labels = {"model": model, "value": value, "workload": workload}
            for name in ("user_feedback_total", "user_feedback_voices_total"):
                assert series[(name, tuple(sorted(labels.items())))] == 0, (name, labels)


def test_no_candidate_no_series_and_a_shadow_candidate_stays_private(tmp_path: Path) -> None:
    idle = exposed(watched(tmp_path / "idle", RoutingState(stable="v0")))
    assert not [key for key in idle if ("model", "v1") in key[1]]
    shadow = RoutingState(stable="v0", candidate="v1", phase="shadow", shadow_fraction=0.2)
    metrics = watched(tmp_path / "shadow", shadow)
    assert (
        exposed(metrics)[
            ("agent_errors_total", (("model", "v1"), ("route", "shadow"), ("workload", "default")))
        ]
        == 0
    )
    # the public exposition learns of v1 only once a public client was routed to it
    assert not [key for key in exposed(metrics, public=True) if ("model", "v1") in key[1]]
