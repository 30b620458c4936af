"""The canary's p99 guard rail reads bucketed histograms: a p99 over the limit fails the step
only when the candidate also has significantly more slow requests than stable.

The numbers are those of a vLLM e2e run that rolled back a 43 -> 64 % candidate: candidate and
stable answered in the same batches of one server, but one of the candidate's 12 requests took
0.74 s, which the 0.5-1 s bucket reads as p99 0.94 s = 1.89x stable's 0.5 s."""

from __future__ import annotations

import pytest

from infra.gateway.metrics import GatewayMetrics
from infra.promql import CanaryWindow, EmbeddedMetrics, RouteStats
from infra.settings import ReleaseSettings
from tasks.release.canary import analyse_step
from tasks.release.latency import binomial_tail, slow_share

CFG = ReleaseSettings(min_requests_per_step=5)


def observed(stable: dict[float, int], candidate: dict[float, int]) -> CanaryWindow:
    """A window read by the embedded reader from the gateway's own histogram: ``{seconds:
    requests}`` per version, all after the window's start, each request a user of its own."""
    metrics = GatewayMetrics()
    reader = EmbeddedMetrics(lambda: metrics.render().decode(), clock=lambda: 100.0)
    since = reader.mark()
    users = iter(range(10**6))
    for route, model, latencies in (("stable", "v0", stable), ("canary", "v1", candidate)):
        for seconds, n in latencies.items():
            for _ in range(n):
                metrics.observe(
                    model=model, route=route, seconds=seconds, error=False, voter=next(users)
                )
    return reader.read(candidate="v1", stable="v0", since=since)


STABLE = {0.2: 600, 0.4: 2272, 0.8: 28}  # p99 just under 0.5 s


def test_one_slow_request_in_a_dozen_is_not_a_latency_regression() -> None:
    window = observed(STABLE, {0.4: 11, 0.74: 1})
    assert window.candidate.p99_s == pytest.approx(0.94)
    assert window.candidate.p99_s / window.stable.p99_s > CFG.latency_p99_ratio_max

    result = analyse_step(window, CFG)

    assert result.verdict == "pass", result.reasons
    line = next(r for r in result.reasons if r.startswith("p99"))
    assert "1 of 29 requests over 500 ms were the candidate's" in line
    assert "not judged slower" in line
    share = 12 / (12 + 2900)  # the candidate's share of the window's requests
    # two bounds tried (above and below stable's p99): the p-value doubled
    assert result.evidence["slow_requests"]["p_value"] == pytest.approx(2 * (1 - (1 - share) ** 29))


def test_a_candidate_slower_on_most_requests_fails_on_a_dozen() -> None:
    result = analyse_step(observed(STABLE, {0.4: 4, 0.74: 8}), CFG)

    assert result.verdict == "fail"
    assert any("8 of 36 requests over 500 ms were the candidate's" in r for r in result.reasons)


def test_a_slow_tail_fails_at_scale() -> None:
    # 5 % of 1,000 requests over stable's p99 bound, against stable's 1 % in the same window
    result = analyse_step(observed(STABLE, {0.4: 950, 0.74: 50}), CFG)

    assert result.verdict == "fail"
    assert result.evidence["slow_requests"]["candidate_slow"] == 50
    assert result.evidence["slow_requests"]["p_value"] < 1e-6


def test_without_histograms_the_ratio_alone_decides() -> None:
    window = CanaryWindow(RouteStats(12, 0, 0.94), RouteStats(2900, 0, 0.5), "test", 60)

    assert slow_share(window.candidate, window.stable) is None
    assert analyse_step(window, CFG).verdict == "fail"


def test_binomial_tail() -> None:
    assert binomial_tail(0, 12, 0.01) == 1.0
    assert binomial_tail(1, 12, 0.01) == pytest.approx(1 - 0.99**12)
    assert binomial_tail(12, 12, 0.5) == pytest.approx(0.5**12)


def test_a_window_without_stable_requests_is_no_data_not_a_verdict() -> None:
    """The loop test's canary rolled back on one request slowed by the machine (479 ms) in a
    window where stable's holdback served nothing, measured against the 50 ms floor; with no
    stable request there is nothing to compare over the same interval: neither a fail nor a
    pass, the step waits for stable's users. With stable traffic, the same candidate slower on
    most of its requests still fails."""
    lone = observed({}, {0.04: 11, 0.48: 1})
    assert lone.stable.requests == 0 and lone.candidate.p99_s and lone.candidate.p99_s > 0.25

    result = analyse_step(lone, CFG)

    assert result.verdict == "no_data", result.reasons
    assert "stable served 0 users < 10 required" in result.reasons[0]
    slower = analyse_step(observed(STABLE, {0.4: 4, 0.74: 8}), CFG)
    assert slower.verdict == "fail"
