"""The canary's cost rail of a cheaper model: the compute per request the gateway metered for
each version, read back through the embedded /metrics reader, fails a step where the student
costs more than stable (``cost_ratio_max``), passes one where it costs less, and is silent in
a release that is not a non-inferiority release (no rail set)."""

from __future__ import annotations

import pytest

from infra.gateway.metrics import GatewayMetrics
from infra.promql import EmbeddedMetrics
from infra.settings import ReleaseSettings
from tasks.release.canary import analyse_step

CFG = ReleaseSettings(analysis_interval_s=60, min_requests_per_step=20)


def _window(student_compute_s: float, stable_compute_s: float = 0.010):
    """A step of 30 student and 90 stable requests, each metered at the given compute."""
    metrics = GatewayMetrics()
    t = [100.0]
    reader = EmbeddedMetrics(lambda: metrics.render().decode(), clock=lambda: t[0])
    since = reader.mark()
    for model, route, n, compute in (
        ("v2", "canary", 30, student_compute_s),
        ("v1", "stable", 90, stable_compute_s),
    ):
        for _ in range(n):
            metrics.observe(model=model, route=route, seconds=0.05, error=False)
            metrics.cost(
                model=model,
                route=route,
                workload="default",
                tokens_in=12,
                tokens_out=3,
                compute_s=compute,
            )
    t[0] = 160.0
    return reader.read(candidate="v2", stable="v1", since=since)


def test_a_student_dearer_in_traffic_than_stable_fails_the_step() -> None:
    got = _window(student_compute_s=0.015)
    assert got.candidate.cost is not None and got.candidate.cost.requests == 30
    assert got.candidate.cost.tokens_out == 90  # 3 tokens out per request, as metered
    result = analyse_step(got, CFG.model_copy(update={"cost_ratio_max": 1.0}))
    assert result.verdict == "fail"
    assert any("cost: 15.00 ms compute per request = 1.50x stable" in r for r in result.reasons)
    assert result.evidence["cost_ratio_vs_stable"] == pytest.approx(1.5)


def test_a_student_cheaper_in_traffic_passes_the_rail() -> None:
    result = analyse_step(_window(0.004), CFG.model_copy(update={"cost_ratio_max": 1.0}))
    assert result.verdict == "pass", result.reasons
    assert result.evidence["cost_ratio_vs_stable"] == pytest.approx(0.4)


def test_a_release_that_must_be_better_has_no_cost_rail() -> None:
    result = analyse_step(_window(0.015), CFG)
    assert result.verdict == "pass", result.reasons
    assert "cost_ratio_vs_stable" not in result.evidence
