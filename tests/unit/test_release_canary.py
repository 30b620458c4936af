"""Canary analysis and its no-data rule, shadow pairing, and the embedded /metrics reader (fake
clock and in-memory metrics: no waiting, no services); the rails' statistics on one step's
numbers are in test_release_canary_rails.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from infra.gateway.metrics import GatewayMetrics
from infra.metrics.promql import CanaryWindow, RouteStats, histogram_quantile
from infra.metrics.promql_embedded import EmbeddedMetrics
from infra.routing import RoutingState, StoreRouting, save_state
from infra.settings import ReleaseSettings
from infra.store import LocalStore
from tasks.release.canary.canary import analyse_step, watch_step
from tasks.release.canary.rollout import Clock, shadow_pairs
from tasks.release.machine import controls
from tasks.release.machine.machine import Step, conclude
from tests.helpers import make_trace

CFG = ReleaseSettings(
    analysis_interval_s=60, step_deadline_s=600, min_requests_per_step=50, max_poll_s=5
)


def window(cand: RouteStats, stable: RouteStats) -> CanaryWindow:
    return CanaryWindow(cand, stable, "test", 60.0)


def test_healthy_candidate_passes_with_its_numbers() -> None:
    result = analyse_step(
        window(RouteStats(100, 1, 0.2, {1: 30}), RouteStats(900, 9, 0.2, {1: 200, -1: 20})), CFG
    )
    assert result.verdict == "pass"
    assert result.evidence["error_ratio_vs_stable"] == pytest.approx(1.0)
    assert result.evidence["p99_ratio_vs_stable"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("cand", "stable", "needle"),
    [
        (
            RouteStats(100, 30, 0.2),
            RouteStats(900, 90, 0.2),
            "errors: 30.00% of 100 requests (100 users) = 3.00x",
        ),
        (RouteStats(100, 0, 0.9), RouteStats(900, 0, 0.3), "p99 900 ms = 3.00x"),
        (RouteStats(100, 0, 0.2, {-1: 25}), RouteStats(900, 0, 0.2, {1: 25}), "feedback 0.00"),
        # stable without errors: its rate counts as 0.1 %, so 3 % errors fail when significant
        (RouteStats(100, 3, 0.2), RouteStats(900, 0, 0.2), "30.00x stable 0.10%"),
    ],
)
def test_regressions_fail_the_step(cand: RouteStats, stable: RouteStats, needle: str) -> None:
    result = analyse_step(window(cand, stable), CFG)
    assert result.verdict == "fail"
    assert any(needle in r for r in result.reasons), result.reasons


def test_too_few_requests_is_no_data_not_a_pass() -> None:
    result = analyse_step(window(RouteStats(49, 0, 0.1), RouteStats(900, 0, 0.1)), CFG)
    assert result.verdict == "no_data" and "49 candidate requests < 50" in result.reasons[0]
    assert analyse_step(None, CFG).verdict == "no_data"


class FakeClock(Clock):
    def __init__(self) -> None:
        self.t = 1_000_000.0
        super().__init__(now=lambda: self.t, sleep=self._sleep)
        self.hooks: list = []

    def _sleep(self, seconds: float) -> None:
        self.t += seconds
        for hook in self.hooks:
            hook(self.t)


class FakeMetrics:
    """Candidate requests arrive at ``rate`` per second from ``start_at`` on (fake time), one
    user each; stable's users are 19 for each of them (the routing fixture's weight of 5 %)."""

    source = "fake"

    def __init__(
        self, clock: FakeClock, rate: float = 0.0, errors: float = 0.0, start_at: float = 0.0
    ) -> None:
        self.clock, self.rate, self.errors, self.start_at = clock, rate, errors, start_at
        self.reads = 0

    def mark(self) -> float:
        return self.clock.now()

    def read(
        self,
        *,
        candidate: str,
        stable: str,
        since: float,
        workload: str | None = None,
    ) -> CanaryWindow:
        self.reads += 1
        now = self.clock.now()
        active = max(0.0, now - max(since, self.start_at))
        n = self.rate * active
        return CanaryWindow(
            RouteStats(n, n * self.errors, 0.1),
            RouteStats(1000, 10, 0.1, users=19 * n),
            "fake",
            now - since,
        )


@pytest.fixture
def routing(tmp_path: Path) -> StoreRouting:
    s = LocalStore(tmp_path / "store")
    save_state(s, RoutingState(stable="v0", candidate="v1", phase="canary", weight=5))
    return StoreRouting(s)


def watch(
    routing: StoreRouting,
    clock: FakeClock,
    metrics: FakeMetrics,
    policy: ReleaseSettings = CFG,
):
    return watch_step(
        routing,
        "v1",
        stable="v0",
        metrics=metrics,
        policy=policy,
        clock=clock,
    )


def test_a_step_without_traffic_waits_for_the_deadline_then_fails(routing: StoreRouting) -> None:
    clock = FakeClock()
    start = clock.now()
    metrics = FakeMetrics(clock, rate=0.0)
    result = watch(routing, clock, metrics)
    assert result.verdict == "no_data"
    assert clock.now() - start >= CFG.step_deadline_s
    assert metrics.reads > 10  # it kept looking for data the whole time
    assert any("deadline" in r for r in result.reasons)


def test_a_wall_clock_set_forward_during_a_step_does_not_end_it_early(
    routing: StoreRouting,
) -> None:
    """NTP steps the wall clock 5 minutes ahead in the middle of a step without traffic: the
    step still waits its whole deadline of real (monotonic) time, as the real clock does."""
    clock = FakeClock()
    ran = [0.0]

    def sleep(seconds: float) -> None:
        ran[0] += seconds
        clock.t += seconds + (300.0 if ran[0] - seconds < 30 <= ran[0] else 0.0)

    stepped = Clock(now=clock.now, sleep=sleep, monotonic=lambda: ran[0])
    result = watch_step(
        routing, "v1", stable="v0", metrics=FakeMetrics(clock), policy=CFG, clock=stepped
    )
    assert result.verdict == "no_data"
    assert CFG.step_deadline_s <= ran[0] < CFG.step_deadline_s + 2 * CFG.poll_s
    assert clock.t - 1_000_000.0 >= ran[0] + 300  # the wall clock did jump


def test_a_clock_without_its_own_monotonic_times_steps_by_now_or_by_the_real_one() -> None:
    fake = Clock(now=lambda: 42.0, sleep=lambda _s: None)
    assert fake.ticks() == 42.0
    real = Clock()
    assert abs(real.ticks() - time.monotonic()) < 5


def test_late_traffic_is_judged_once_enough_arrived(routing: StoreRouting) -> None:
    clock = FakeClock()
    metrics = FakeMetrics(clock, rate=1.0, start_at=clock.now() + 200)
    result = watch(routing, clock, metrics)
    assert result.verdict == "pass"
    assert 250 <= clock.now() - 1_000_000.0 < CFG.step_deadline_s


def test_a_failing_candidate_fails_by_the_end_of_the_interval(routing: StoreRouting) -> None:
    clock = FakeClock()  # no early pass; the sequential test may still fail it earlier
    policy = CFG.model_copy(update={"sequential_alpha": None})
    result = watch(routing, clock, FakeMetrics(clock, rate=5.0, errors=0.5), policy=policy)
    assert result.verdict == "fail"
    assert clock.now() - 1_000_000.0 <= CFG.analysis_interval_s + CFG.poll_s


def test_a_rollback_during_the_step_ends_it_at_once(routing: StoreRouting) -> None:
    clock = FakeClock()
    clock.hooks.append(lambda t: t > 1_000_020 and routing.rollback(reason="alert", actor="am"))
    result = watch(routing, clock, FakeMetrics(clock, rate=5.0))
    assert result.verdict == "interrupted" and result.state.phase == "rolled_back"
    assert clock.now() - 1_000_000.0 < CFG.analysis_interval_s


def test_pause_waits_and_resume_restarts_the_analysis_window(routing: StoreRouting) -> None:
    clock = FakeClock()
    events = {1_000_030: "pause", 1_000_300: "resume"}

    def act(t: float) -> None:
        for at, action in list(events.items()):
            if t >= at:
                getattr(controls, action)(routing, None, actor="person")
                del events[at]

    clock.hooks.append(act)
    result = watch(routing, clock, FakeMetrics(clock, rate=5.0))
    assert result.verdict == "pass"
    assert clock.now() >= 1_000_300 + CFG.analysis_interval_s


def test_shadow_pairs_match_by_pairing_id_and_candidate() -> None:
    at = datetime(2026, 1, 1, 10, tzinfo=UTC)
    records = [
        make_trace(1, at, pairing_id="p1", route="stable"),
        make_trace(2, at, pairing_id="p1", route="shadow", model_version="v1"),
        make_trace(3, at, pairing_id="p2", route="stable"),  # its shadow never came back
        make_trace(4, at, pairing_id="p3", route="shadow", model_version="v9"),
        make_trace(5, at - timedelta(hours=1), pairing_id="p0", route="stable"),
        make_trace(6, at - timedelta(hours=1), pairing_id="p0", route="shadow", model_version="v1"),
    ]
    pairs = shadow_pairs(records, candidate="v1", since=at)
    assert [(s.trace_id, c.trace_id) for s, c in pairs] == [("trace-00001", "trace-00002")]


def test_histogram_quantile_interpolates_like_promql() -> None:
    buckets = {0.1: 50.0, 0.5: 90.0, 1.0: 100.0, float("inf"): 100.0}
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.95)
    assert histogram_quantile(0.99, {1.0: 0.0, float("inf"): 0.0}) is None
    assert histogram_quantile(0.99, {1.0: 10.0, float("inf"): 20.0}) == 1.0  # in +Inf


def test_embedded_reader_uses_deltas_between_scrapes() -> None:
    metrics = GatewayMetrics()
    for _ in range(30):
        metrics.observe(model="v0", route="stable", seconds=0.05, error=False)
    t = [100.0]
    reader = EmbeddedMetrics(lambda: metrics.render().decode(), clock=lambda: t[0])
    since = reader.mark()
    for i in range(20):
        metrics.observe(model="v1", route="canary", seconds=0.2, error=i < 5)
    for _ in range(10):
        metrics.observe(model="v0", route="stable", seconds=0.05, error=False)
    for voter in (1, 2, 3, 3, 3):  # one user's second and third votes are not voices
        metrics.vote(model="v1", value=1, workload="default", voter=voter, epoch=())
    t[0] = 160.0
    got = reader.read(candidate="v1", stable="v0", since=since)
    assert (got.candidate.requests, got.candidate.errors) == (20, 5)
    assert got.stable.requests == 10  # the 30 before the mark are not in the window
    assert got.candidate.feedback == {1: 3.0} and got.window_s == 60.0
    assert 0.1 < got.candidate.p99_s <= 0.25
    with pytest.raises(Exception, match="snapshot"):
        reader.read(candidate="v1", stable="v0", since=50.0)


def test_a_run_waiting_on_a_pause_steps_aside_when_release_control_resumes(
    routing: StoreRouting,
) -> None:
    clock = FakeClock()
    events = {1_000_030: {}, 1_000_300: {"handover": True}}

    def act(t: float) -> None:
        for at, kwargs in list(events.items()):
            if t >= at:
                if kwargs:
                    controls.resume(routing, None, actor="person", **kwargs)
                else:
                    controls.pause(routing, None, actor="person")
                del events[at]

    clock.hooks.append(act)
    result = watch(routing, clock, FakeMetrics(clock, rate=5.0))
    assert result.verdict == "interrupted" and "release-control" in result.reasons[0]
    assert routing.load().phase == "canary"  # the run that resumed it carries on


class IdleStableMetrics(FakeMetrics):
    """A canary step in which stable serves nobody (one API key whose bucket is in the canary
    cohort): every request is the candidate's, each one failing after 9.9 s."""

    def read(
        self, *, candidate: str, stable: str, since: float, workload: str | None = None
    ) -> CanaryWindow:
        self.reads += 1
        n = self.rate * (self.clock.now() - since)
        return CanaryWindow(
            RouteStats(n, n, 9.9, users=min(n, 30.0), error_users=min(n, 30.0)),
            RouteStats(0, 0, None),
            "fake",
            self.clock.now() - since,
        )


def test_a_step_in_which_stable_served_nobody_is_held_never_passed(routing: StoreRouting) -> None:
    """Nothing was compared: a candidate failing every request with a 9.9 s p99 once passed
    such a step (the error test had no stable users to weigh it against, the p99 was not judged,
    the sequential test skipped). Now it waits for stable's users until the step's deadline,
    then the release holds at weight 0 for a person."""
    clock = FakeClock()
    result = watch(routing, clock, IdleStableMetrics(clock, rate=5.0))
    assert result.verdict == "no_data", result.reasons
    assert clock.now() - 1_000_000.0 >= CFG.step_deadline_s
    assert "stable served 0 users < 10 required" in result.reasons[0]

    state = conclude(
        routing, None, "v1", at=Step("canary"), result=result, policy=CFG, actor="test"
    )
    assert (state.phase, state.weight, state.stable, state.candidate) == ("held", 0.0, "v0", "v1")
