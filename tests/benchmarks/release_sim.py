"""Simulated releases through the real decision code, for the error-rate benchmark and its fast
test (tests/unit/test_release_error_rates.py).

Canary: a population of users with sticky routing (the gateway's own bucket hash), heavy and
light users (Zipf activity), each with a taste of their own (how often they vote an answer up),
sends requests whose rate and latency follow a load that comes and goes (bursts: ``burst_on_s``
busy, ``burst_off_s`` quiet, latency x ``burst_slowdown`` and rate x ``burst_rate`` while busy).
Each request is counted by the gateway's real :class:`~infra.gateway.metrics.GatewayMetrics`
(raw and voice series, the line's epoch per step), read by the real
:class:`~infra.promql.EmbeddedMetrics` (exposition text, parsed), and judged by the real
:func:`~tasks.release.canary.watch_step` on a fake clock, step by step with the real weights
(:meth:`~infra.settings.ReleaseSettings.canary_weight`), until promoted, rolled back or held.
One client can be made hostile: it votes down every answer it gets.

Golden gate: per item a chance of being right that both versions share (A/A), or the candidate's
lowered by ``delta``; each version answers once; the real :func:`paired_test` and :func:`decide`.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from infra.gateway.metrics import GatewayMetrics
from infra.gateway.routing import BUCKETS, bucket
from infra.promql import EmbeddedMetrics
from infra.routing import RoutingState
from infra.settings import ReleaseSettings
from tasks.release.canary import watch_step
from tasks.release.rollout import Clock


@dataclass(frozen=True)
class Version:
    """How a version behaves: latency scale, error probability scale, and how much less often
    users vote its answers up."""

    latency: float = 1.0
    errors: float = 1.0
    feedback_drop: float = 0.0


SAME = Version()
KNOWN_BAD = {
    "p99 1.5x slower": Version(latency=1.5),
    "3x the errors": Version(errors=3.0),
    "feedback 20 points lower": Version(feedback_drop=0.20),
}


@dataclass
class Load:
    """Traffic that comes and goes."""

    rate: float = 8.0  # requests per second when quiet
    burst_on_s: float = 7.0
    burst_off_s: float = 5.0
    burst_rate: float = 1.5
    burst_slowdown: float = 3.0

    def busy(self, t: float) -> bool:
        """Whether ``t`` falls in a burst."""
        return (t % (self.burst_on_s + self.burst_off_s)) < self.burst_on_s


@dataclass
class Population:
    """Users: activity weights, tastes, and who is hostile."""

    n_users: int = 1000
    base_error: float = 0.02
    base_up: float = 0.65
    vote_rate: float = 0.3
    median_latency_s: float = 0.2
    latency_sigma: float = 0.35
    hostile_user: bool = False


POLICY = ReleaseSettings(
    analysis_interval_s=300, step_deadline_s=900, min_requests_per_step=50, max_poll_s=10
)


class _Routing:
    """The line's routing state as the release moves it (in memory)."""

    def __init__(self) -> None:
        self.state = RoutingState(stable="v0", candidate="v1", phase="canary", release_id="r1")

    def load(self) -> RoutingState:
        return self.state


@dataclass
class Outcome:
    """How one simulated release ended."""

    outcome: str  # promoted | rolled_back | held
    candidate_requests: int
    reasons: list[str] = field(default_factory=list)


class _World:
    """Users sending requests through the gateway's metrics on a fake clock."""

    def __init__(
        self, pop: Population, load: Load, cand: Version, rng: random.Random, seed: int
    ) -> None:
        self.pop, self.load, self.cand, self.rng = pop, load, cand, rng
        self.metrics = GatewayMetrics()
        self.t = 0.0
        self.routing = _Routing()
        self.weights = [1.0 / (r + 1) ** 0.7 for r in range(pop.n_users)]
        self.taste = [min(0.98, max(0.02, rng.gauss(pop.base_up, 0.15))) for _ in self.weights]
        self.salt = f"cand-{seed}"
        self.candidate_requests = 0

    def advance(self, seconds: float) -> None:
        end = self.t + seconds
        while self.t < end:
            self.t += 1.0
            busy = self.load.busy(self.t)
            rate = self.load.rate * (self.load.burst_rate if busy else 1.0)
            for _ in range(_poisson(self.rng, rate)):
                self._request(busy)

    def _request(self, busy: bool) -> None:
        pop, state = self.pop, self.routing.state
        user = self.rng.choices(range(pop.n_users), weights=self.weights)[0]
        canary = bucket(str(user), salt=self.salt) < state.weight * (BUCKETS / 100)
        v, model, route = (self.cand, "v1", "canary") if canary else (SAME, "v0", "stable")
        slow = self.load.burst_slowdown if busy else 1.0
        latency = pop.median_latency_s * slow * v.latency
        latency *= math.exp(self.rng.gauss(0, pop.latency_sigma))
        error = self.rng.random() < pop.base_error * v.errors
        epoch = (state.release_id, state.candidate, state.phase, state.weight, state.step)
        self.metrics.observe(
            model=model, route=route, seconds=latency, error=error, voter=user, epoch=epoch
        )
        self.candidate_requests += canary
        hostile = pop.hostile_user and user == 0
        if error or not (hostile or self.rng.random() < pop.vote_rate):
            return
        up = not hostile and self.rng.random() < self.taste[user] - v.feedback_drop
        self.metrics.vote(
            model=model, value=1 if up else -1, workload="default", voter=user, epoch=epoch
        )


def _poisson(rng: random.Random, lam: float) -> int:
    k, p, limit = 0, 1.0, math.exp(-lam)
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def simulate_canary(
    cand: Version,
    *,
    seed: int,
    policy: ReleaseSettings = POLICY,
    pop: Population | None = None,
    load: Load | None = None,
) -> Outcome:
    """One release's canary, every step, through the real analysis."""
    rng = random.Random(seed)
    world = _World(pop or Population(), load or Load(), cand, rng, seed)
    reader = EmbeddedMetrics(lambda: world.metrics.render().decode(), clock=lambda: world.t)
    clock = Clock(now=lambda: world.t, sleep=world.advance)
    for step in range(len(policy.canary_steps)):
        world.routing.state = world.routing.state.model_copy(
            update={"weight": policy.canary_weight(step), "step": step}
        )
        result = watch_step(
            world.routing, "v1", stable="v0", metrics=reader, policy=policy, clock=clock
        )
        if result.verdict != "pass":
            ended = "rolled_back" if result.verdict == "fail" else "held"
            return Outcome(ended, world.candidate_requests, result.reasons)
    return Outcome("promoted", world.candidate_requests)


def simulate_gate(
    delta: float, *, seed: int, n_items: int = 400, policy: ReleaseSettings = POLICY
) -> str:
    """One golden gate: the decision (PROCEED_TO_SHADOW | MANUAL_REVIEW | ROLLBACK)."""
    from tasks.release.gate import decide
    from tasks.release.stats import paired_test

    rng = random.Random(seed)
    chance = [min(0.99, max(0.01, rng.betavariate(1.2, 0.8))) for _ in range(n_items)]
    base = [float(rng.random() < q) for q in chance]
    cand = [float(rng.random() < max(0.0, q - delta)) for q in chance]
    test = paired_test(base, cand, n_bootstrap=200, seed=seed)
    return decide(test, policy)[0].value


def rate_interval(k: int, n: int) -> tuple[float, float]:
    """A 95 % Wilson interval of ``k`` of ``n``."""
    if n == 0:
        return 0.0, 1.0
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def canary_table(runs: int, *, seed: int = 0, **kw: Any) -> dict[str, dict[str, Any]]:
    """Outcome counts of ``runs`` releases per kind (A/A and each known-bad candidate)."""
    table = {}
    for i, (name, cand) in enumerate([("A/A (identical)", SAME), *KNOWN_BAD.items()]):
        outcomes = [simulate_canary(cand, seed=seed + 10_000 * i + r, **kw) for r in range(runs)]
        counts = Counter(o.outcome for o in outcomes)
        caught = [o.candidate_requests for o in outcomes if o.outcome != "promoted"]
        table[name] = {
            "runs": runs,
            **{k: counts.get(k, 0) for k in ("promoted", "rolled_back", "held")},
            "median_requests_to_catch": sorted(caught)[len(caught) // 2] if caught else None,
        }
    return table


def gate_table(runs: int, *, seed: int = 0, n_items: int = 400) -> dict[str, Counter[str]]:
    """Gate decisions of ``runs`` golden sets per kind (A/A, 5 points lower)."""
    return {
        name: Counter(simulate_gate(delta, seed=seed + r, n_items=n_items) for r in range(runs))
        for name, delta in (("A/A (identical)", 0.0), ("golden 5 points lower", 0.05))
    }
