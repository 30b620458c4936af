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
    """A step of 30 student and 90 stable requests, each metered at the given compute (by a
    server that does not say its batches)."""
    return _batched_window([(0, student_compute_s)] * 30, [(0, stable_compute_s)] * 90)


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


def _batched_window(student: list[tuple[int, float]], stable: list[tuple[int, float]]):
    """A step whose requests were answered in batches: (batch size, compute per request) for
    each request of the student (canary) and of stable."""
    metrics = GatewayMetrics()
    t = [100.0]
    reader = EmbeddedMetrics(lambda: metrics.render().decode(), clock=lambda: t[0])
    since = reader.mark()
    users = iter(range(10**6))  # each request a user of its own
    for model, route, requests in (("v2", "canary", student), ("v1", "stable", stable)):
        for size, compute in requests:
            metrics.observe(model=model, route=route, seconds=0.05, error=False, voter=next(users))
            metrics.cost(
                model=model,
                route=route,
                workload="default",
                tokens_in=12,
                tokens_out=3,
                compute_s=compute,
                batch_size=size,
            )
    t[0] = 160.0
    return reader.read(candidate="v2", stable="v1", since=since)


# stable, nine users in ten: most of its answers share a batch of eight (1.5 ms each), some come
# alone (10 ms); the student's tenth comes alone
STABLE = [(1, 0.010)] * 10 + [(8, 0.0015)] * 80


def test_a_student_cheaper_at_equal_batches_passes_though_its_small_share_batches_less() -> None:
    got = _batched_window([(1, 0.004)] * 30, STABLE)
    # over all requests it looks dearer (4 ms against 2.4 ms), only because it served alone
    assert got.candidate.cost.compute_per_request_s > got.stable.cost.compute_per_request_s
    result = analyse_step(got, CFG.model_copy(update={"cost_ratio_max": 1.0}))
    assert result.verdict == "pass", result.reasons
    assert result.evidence["cost_ratio_matched_batches"] == pytest.approx(0.4)
    assert result.evidence["matched_coverage"] == 1.0
    assert any("at the same batch sizes" in r for r in result.reasons)


def test_a_student_dearer_at_equal_batches_fails_though_it_looks_cheaper_overall() -> None:
    # the student is dearer at each batch size, and looks cheaper overall only because its
    # answers shared bigger batches than stable's
    student = [(8, 0.002)] * 30
    stable = [(1, 0.010)] * 80 + [(8, 0.0015)] * 10
    got = _batched_window(student, stable)
    assert got.candidate.cost.compute_per_request_s < got.stable.cost.compute_per_request_s
    result = analyse_step(got, CFG.model_copy(update={"cost_ratio_max": 1.0}))
    assert result.verdict == "fail"
    assert result.evidence["cost_ratio_matched_batches"] == pytest.approx(0.002 / 0.0015)


def test_a_server_that_does_not_say_its_batches_is_compared_over_all_requests() -> None:
    got = _batched_window([(0, 0.015)] * 30, [(0, 0.010)] * 90)  # 0: not reported
    result = analyse_step(got, CFG.model_copy(update={"cost_ratio_max": 1.0}))
    assert result.verdict == "fail"
    assert "cost_ratio_matched_batches" not in result.evidence
    assert result.evidence["cost_ratio_vs_stable"] == pytest.approx(1.5)
