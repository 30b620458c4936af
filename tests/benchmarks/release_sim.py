"""Simulated releases through the real decision code, for the error-rate benchmark
(bench_release_decisions.py) and its fast test (tests/unit/test_release_error_rates.py).

A release: the shadow phase (the real :func:`~tasks.release.canary.rollout.watch_shadow` on the
simulated shadow pairs, scored by their live reward), then every canary step with the real
weights (:meth:`~infra.settings.ReleaseSettings.canary_weight`) judged by the real
:func:`~tasks.release.canary.canary.watch_step` on a fake clock, until promoted, rolled back or held.
Traffic is :mod:`tests.benchmarks.release_world` (the gateway's routing and metrics). Here the
canary reads the gateway's exposition with the embedded reader
(:class:`~infra.metrics.promql_embedded.EmbeddedMetrics`); :mod:`tests.benchmarks.release_prom`
reads the same traffic through Prometheus with the alert rules.

Golden gate: per item a chance of being right that both versions share (A/A), or the candidate's
lowered by ``delta``; each version answers once; the real :func:`paired_test` and :func:`decide`.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, cast

from infra.metrics.promql_embedded import EmbeddedMetrics, Series, parse_exposition, route_stats
from infra.settings import ReleaseSettings
from tasks.release.canary.canary import watch_step
from tasks.release.canary.rollout import Clock, PhaseResult, watch_shadow
from tests.benchmarks.release_world import Load, Names, Population, Version, World

SAME = Version()
KNOWN_BAD: dict[str, Version] = {
    "p99 1.5x slower": Version(latency=1.5),
    "tail-only p99 1.6x (median same)": Version(tail=1.6),
    "3x the errors": Version(errors=3.0),
    "feedback 20 points lower": Version(feedback_drop=0.20),
}
RARE_BASE = 0.003  # "3x the errors at 0.3 % base": the population's base error set to this
RARE_BAD = {"3x errors at 0.3 % base": Version(errors=3.0)}

RAMP = Load(ramp_per_hour=1.0)
POPULATIONS: dict[str, Population] = {
    "1,000 users": Population(),
    # the traffic a tail-only regression needs (weighed by users): 12,000 requests a step
    "4,000 users at 40 req/s": Population(clients=4000, load=Load(rate=40.0)),
    "20 users": Population(clients=20, load=Load(rate=1.0)),
    "one API key, no user": Population(kind="one_key", clients=1, load=Load(rate=2.0)),
    "anonymous behind a proxy": Population(kind="proxy", clients=300, load=Load(rate=4.0)),
    # 200 users at 60 req/s: about 90 requests each per 300 s step (enough users that a 5 %
    # step has the 10 a side a comparison needs); each with its own error propensity (some
    # users' prompts fail more often)
    "heavy users": Population(clients=200, zipf=0.0, user_error_sigma=1.0, load=Load(rate=60.0)),
    "rare errors (0.1 %)": Population(base_error=0.001),
    "own latency scales": Population(user_latency_sigma=0.6),
    "load ramp (2x in an hour)": Population(load=RAMP),
}

POLICY = ReleaseSettings(
    analysis_interval_s=300, step_deadline_s=900, min_requests_per_step=50, max_poll_s=10
)


@dataclass
class Outcome:
    """How one simulated release ended."""

    outcome: str  # promoted | rolled_back | held
    candidate_requests: int
    phase: str = "canary"  # where it ended: shadow, canary, or "alert <name>"
    reasons: list[str] = field(default_factory=list)


class _Pairs:
    """The shadow pairs as the trace source the shadow phase reads."""

    def __init__(self, world: World) -> None:
        self.world = world

    def read_window(self, start: Any, end: Any) -> Any:
        records = [r for _, s, c in self.world.shadow_pairs for r in (s, c)]
        return type("Batch", (), {"records": records})()


class _Reward:
    """Scores an answer by the live reward the simulation wrote into it."""

    def score(self, items: list[Any]) -> list[Any]:
        return [type("Score", (), {"total": float(i.answer)})() for i in items]


def ended(result: PhaseResult, world: World, phase: str) -> Outcome:
    """The outcome of a phase that did not pass."""
    kind = "rolled_back" if result.verdict == "fail" else "held"
    return Outcome(kind, world.candidate_requests, phase, result.reasons)


def run_shadow(world: World, policy: ReleaseSettings, clock: Clock | None = None) -> PhaseResult:
    """The real shadow phase on the world's mirrored pairs."""
    clock = clock or Clock(now=lambda: world.t, sleep=world.advance)
    return watch_shadow(
        cast(Any, world),
        world.names.candidate,
        source=cast(Any, _Pairs(world)),
        scorer=cast(Any, _Reward()),
        policy=policy,
        clock=clock,
    )


def start_step(world: World, policy: ReleaseSettings, step: int) -> None:
    """Move the routing state to canary step ``step``."""
    world.state = world.state.model_copy(
        update={"phase": "canary", "weight": policy.canary_weight(step), "step": step}
    )


def release_names(seed: int) -> Names:
    """A candidate of its own per simulated release: the canary cohort is hashed with the
    candidate's name (:func:`infra.gateway.cohorts.bucket`), so one fixed name put the same users
    in every simulated release's cohort and sampled one cohort size only."""
    return Names(candidate=f"v1-{seed}")


def simulate_release(
    cand: Version,
    *,
    seed: int,
    pop: Population | None = None,
    policy: ReleaseSettings = POLICY,
    shadow: bool = True,
    voices_per_step: int = 1,
    history_baseline: bool = False,
) -> Outcome:
    """One release (shadow, then every canary step) through the real analysis, read by the
    embedded reader (``history_baseline``: the wrong design, stable's previous hour)."""
    pop = pop or Population()
    world = World(
        pop,
        cand,
        seed=seed,
        names=release_names(seed),
        voices_per_step=voices_per_step,
        shadow_fraction=policy.shadow_fraction,
        meter_cost=policy.cost_ratio_max is not None,
    )
    reader: Any = EmbeddedMetrics(lambda: world.metrics.render().decode(), clock=lambda: world.t)
    if history_baseline:
        reader = HistoryBaseline(world)
    clock = Clock(now=lambda: world.t, sleep=reader.advance if history_baseline else world.advance)
    if shadow:
        result = run_shadow(world, policy, clock)
        if result.verdict != "pass":
            return ended(result, world, "shadow")
    names = world.names
    for step in range(len(policy.canary_steps)):
        start_step(world, policy, step)
        result = watch_step(
            cast(Any, world),
            names.candidate,
            stable=names.stable,
            metrics=reader,
            policy=policy,
            clock=clock,
        )
        if result.verdict != "pass":
            return ended(result, world, "canary")
    return Outcome("promoted", world.candidate_requests)


def simulate_canary(cand: Version, *, seed: int, **kw: Any) -> Outcome:
    """One release's canary alone (no shadow phase)."""
    return simulate_release(cand, seed=seed, shadow=False, **kw)


class HistoryBaseline:
    """The wrong design, for contrast: the candidate's window now against stable's same
    window an hour earlier (stable's history as the baseline). An hour of stable-only traffic
    runs first."""

    source = "history"

    def __init__(self, world: World) -> None:
        self.world = world
        self.snaps: dict[int, Series] = {}
        cand, world.state = world.state, world.state.model_copy(update={"candidate": None})
        self.advance(3600)
        world.state = cand

    def advance(self, seconds: float) -> None:
        """Serve ``seconds`` and keep a scrape every 10 s."""
        for _ in range(math.ceil(seconds / 10)):
            self.world.advance(10)
            self.snaps[self.world.t] = parse_exposition(self.world.metrics.render().decode())

    def mark(self) -> float:
        return self.world.t

    def read(self, *, candidate: str, stable: str, since: float, workload: str | None = None):  # type: ignore[no-untyped-def]
        from infra.metrics.promql import CanaryWindow

        snap = self.snaps
        now, s = self.world.t, int(since)
        return CanaryWindow(
            candidate=route_stats(snap[now], snap[s], candidate, "canary", workload=workload),
            stable=route_stats(
                snap[now - 3600], snap[s - 3600], stable, "stable", workload=workload
            ),
            source=self.source,
            window_s=now - since,
        )


def simulate_gate(
    delta: float, *, seed: int, n_items: int = 400, policy: ReleaseSettings = POLICY
) -> str:
    """One golden gate: the decision (PROCEED_TO_SHADOW | MANUAL_REVIEW | ROLLBACK)."""
    from tasks.release.gate.superiority import decide
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


def rows_for(pop: Population) -> list[tuple[str, Version, Population]]:
    """The candidates a population is run with: A/A, the known-bad ones, and 3x errors at a
    0.3 % base."""
    rows = [("A/A (identical)", SAME, pop), *((k, v, pop) for k, v in KNOWN_BAD.items())]
    rare = replace(pop, base_error=RARE_BASE)
    return rows + [(k, v, rare) for k, v in RARE_BAD.items()]


def summarize(name: str, outcomes: list[Outcome]) -> dict[str, Any]:
    """Counts of outcomes, where releases ended, and the median candidate requests to catch."""
    counts = Counter(o.outcome for o in outcomes)
    caught = sorted(o.candidate_requests for o in outcomes if o.outcome != "promoted")
    return {
        "runs": len(outcomes),
        **{k: counts.get(k, 0) for k in ("promoted", "rolled_back", "held")},
        "by_phase": dict(Counter(o.phase for o in outcomes if o.outcome != "promoted")),
        "median_requests_to_catch": caught[len(caught) // 2] if caught else None,
        "aa": name.startswith("A/A"),
    }


def release_table(
    runs: int, *, pop: Population, seed: int = 0, **kw: Any
) -> dict[str, dict[str, Any]]:
    """Outcome counts of ``runs`` releases per candidate kind (embedded reader)."""
    table = {}
    for i, (name, cand, p) in enumerate(rows_for(pop)):
        outcomes = [
            simulate_release(cand, seed=seed + 10_000 * i + r, pop=p, **kw) for r in range(runs)
        ]
        table[name] = summarize(name, outcomes)
    return table


def canary_table(runs: int, *, seed: int = 0, **kw: Any) -> dict[str, dict[str, Any]]:
    """The canary alone for the default population (kept for the friendly baseline)."""
    return release_table(runs, pop=kw.pop("pop", Population()), seed=seed, shadow=False, **kw)


def gate_table(runs: int, *, seed: int = 0, n_items: int = 400) -> dict[str, Counter[str]]:
    """Gate decisions of ``runs`` golden sets per kind (A/A, 5 points lower)."""
    return {
        name: Counter(simulate_gate(delta, seed=seed + r, n_items=n_items) for r in range(runs))
        for name, delta in (("A/A (identical)", 0.0), ("golden 5 points lower", 0.05))
    }
