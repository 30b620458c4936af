"""Simulated traffic for the release benchmark (tests/benchmarks/release_sim.py): clients as
production has them, routed by the gateway's own :func:`~infra.gateway.cohorts.decide` and
counted by its own :class:`~infra.gateway.metrics.GatewayMetrics` on a fake clock.

A population is a set of clients: identified users (``user`` set), one API key with no
``user`` (every request from one address), or anonymous clients behind one proxy (many
clients, one peer address, no ``user``). Each client has an activity weight (Zipf), a taste
(how often it votes an answer up), its own latency scale and its own error propensity. Load
changes on the step's timescale: bursts of minutes (rate and latency up together) and a ramp
across the release. Each simulated second draws from its own random generator (seeded by the
release and the second), so a release can be rewound to any second and replayed with another
routing weight (the Prometheus path does this: :mod:`tests.benchmarks.release_prom`).
"""

from __future__ import annotations

import bisect
import inspect
import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any, Literal

from infra.gateway.cohorts import Decision, decide
from infra.gateway.metrics import GatewayMetrics
from infra.gateway.voices import epoch_of
from infra.routing import RoutingState
from infra.routing.state import own_workload
from infra.traces import TraceRecord

SCRAPE_S = 15  # Prometheus's scrape interval in the simulation
# the families the release reads (infra/metrics/promql.py) and its alert rules: the rest of the
# gateway's exposition is left out of the backfill to keep it small
EXPORTED = ("agent_", "user_feedback_")


@dataclass(frozen=True)
class Version:
    """How a version behaves against stable: latency scale (``tail``: requests in their own
    slowest 3 % only), error probability scale, how much less often users vote its answers up,
    its live reward's drop (shadow), and its compute per request."""

    latency: float = 1.0
    tail: float = 1.0
    errors: float = 1.0
    feedback_drop: float = 0.0
    reward_drop: float = 0.0
    cost: float = 1.0


@dataclass(frozen=True)
class Load:
    """Traffic that changes on the step's timescale: bursts of ``burst_on_s`` in every
    ``burst_period_s`` (rate x ``burst_rate``, latency x ``burst_slowdown``), and a ramp (rate
    and latency grow by ``ramp_per_hour`` of their start value each hour)."""

    rate: float = 8.0  # requests per second, quiet, at the start
    burst_on_s: float = 120.0
    burst_period_s: float = 600.0
    burst_rate: float = 2.0
    burst_slowdown: float = 2.0
    ramp_per_hour: float = 0.0

    def at(self, t: float) -> tuple[float, float]:
        """(requests per second, latency factor) at ``t`` seconds into the release."""
        busy = (t % self.burst_period_s) < self.burst_on_s
        ramp = 1.0 + self.ramp_per_hour * max(0.0, t) / 3600
        rate = self.rate * ramp * (self.burst_rate if busy else 1.0)
        return rate, ramp * (self.burst_slowdown if busy else 1.0)


@dataclass(frozen=True)
class Population:
    """Who sends requests: ``clients`` of ``kind`` (users, one_key, proxy)."""

    kind: str = "users"
    clients: int = 1000
    base_error: float = 0.02
    base_up: float = 0.65
    vote_rate: float = 0.3
    median_latency_s: float = 0.2
    latency_sigma: float = 0.35  # per request
    user_latency_sigma: float = 0.0  # per client: each client's own latency scale
    user_error_sigma: float = 0.0  # per client: each client's own error propensity
    zipf: float = 0.7
    load: Load = field(default_factory=Load)
    hostile_client: bool = False  # client 0 votes down every answer it gets


@dataclass(frozen=True)
class Client:
    """One requester as the gateway sees it."""

    user: str | None
    peer: str
    activity: float
    taste: float
    latency: float
    error: float


def sticky_key(client: Client) -> str | None:
    """The key the gateway routes a request by, and (issue 51, item 2) counts its voice by.
    With ``infra.gateway.requester`` (one key: user, else session, else the client's address)
    it is that module's :func:`key_of`; before it, ``req.user_id or req.session_id``
    (infra/gateway/service.py; the simulated clients send no session), and a request with
    neither was routed at random. The one place the benchmark chooses a key: point it at the
    gateway's own function if that moves."""
    try:
        from infra.gateway.requester import key_of
    except ImportError:
        return client.user
    return key_of(user=client.user, client=client.peer)


def voter_of(metrics: GatewayMetrics, client: Client) -> int | None:
    """The voice key the gateway's ledger gives this client's requests: from the routing key
    where the ledger takes one (issue 51), else from its user or peer address."""
    voter: Any = metrics.ledger.voter
    if len(inspect.signature(voter).parameters) == 1:
        return voter(sticky_key(client))  # type: ignore[no-any-return]
    return voter(client.user, client.peer)  # type: ignore[no-any-return]


# The canary buckets' key, where the gateway keys them (issue 51): a fixed one, so runs repeat.
_SECRET = b"release-benchmark" if "secret" in inspect.signature(decide).parameters else None


def route(state: RoutingState, client: Client, rng: random.Random) -> Decision:
    """The gateway's routing decision for one request of ``client``."""
    extra: dict[str, Any] = {} if _SECRET is None else {"secret": _SECRET}
    return decide(state, model="flywheel", sticky_key=sticky_key(client), rand=rng.random, **extra)


def make_clients(pop: Population, rng: random.Random) -> list[Client]:
    """The population's clients (their traits drawn from ``rng``)."""
    out = []
    for i in range(pop.clients):
        user = f"user-{i}" if pop.kind == "users" else None
        # one key: every request from one address; proxy: many clients, one peer address
        peer = f"10.1.{i // 250}.{i % 250}" if pop.kind == "users" else "192.0.2.10"
        out.append(
            Client(
                user=user,
                peer=peer,
                activity=1.0 / (i + 1) ** pop.zipf,
                taste=min(0.98, max(0.02, rng.gauss(pop.base_up, 0.15))),
                latency=math.exp(rng.gauss(0, pop.user_latency_sigma)),
                error=math.exp(rng.gauss(0, pop.user_error_sigma) - pop.user_error_sigma**2 / 2),
            )
        )
    return out


@dataclass(frozen=True)
class Names:
    """One simulated release's labels (distinct per release, so many share one TSDB)."""

    stable: str = "v0"
    candidate: str = "v1"
    workload: str = "default"
    release_id: str = "r1"


class World:
    """A population's requests through the gateway's routing and metrics, second by second.

    ``log`` keeps every metrics call with its second, so :meth:`rewind` can rebuild the
    gateway's counters at an earlier second; ``scrapes`` (when ``record``) the exposition every
    ``SCRAPE_S`` seconds, as Prometheus would have scraped it."""

    def __init__(
        self,
        pop: Population,
        cand: Version,
        *,
        seed: int,
        names: Names = Names(),
        shadow_fraction: float = 0.2,
        voices_per_step: int = 1,
        record: bool = False,
        meter_cost: bool = False,
    ) -> None:
        self.pop, self.cand, self.seed, self.names = pop, cand, seed, names
        self.clients = make_clients(pop, random.Random(seed))
        self.cum = list(accumulate(c.activity for c in self.clients))
        self.cap, self.record, self.meter_cost = voices_per_step, record, meter_cost
        self.metrics = GatewayMetrics(voices_per_step=voices_per_step)
        self.t = 0
        self.log: list[tuple[int, str, dict[str, Any]]] = []
        self.state = RoutingState(
            stable=names.stable,
            candidate=names.candidate,
            phase="shadow",
            release_id=names.release_id,
            shadow_fraction=shadow_fraction,
            workload=names.workload,
        )
        self.scrapes: list[tuple[int, list[str]]] = []
        self.shadow_pairs: list[tuple[int, TraceRecord, TraceRecord]] = []
        self.candidate_requests = 0

    @property
    def state(self) -> RoutingState:
        """The release line's routing now (its workload's view)."""
        return self._view

    @state.setter
    def state(self, view: RoutingState) -> None:
        # the gateway hears of every change of the routing state (StateWatcher's on_change)
        self._view = view
        workload = own_workload(view.workload)
        if workload is None:  # the shared release line
            whole = view.model_copy(update={"workload": None})
        else:
            whole = RoutingState(stable=self.names.stable).with_workload(workload, view)
        self._call("set_routing", state=whole)

    def load(self) -> RoutingState:
        """The routing state now (the release's routing backend, in memory)."""
        return self.state

    def advance(self, seconds: float) -> None:
        """Serve the requests of the next ``seconds`` (whole seconds)."""
        end = self.t + math.ceil(seconds - 1e-9)
        while self.t < end:
            self.t += 1
            rng = random.Random(self.seed * 1_000_003 + self.t)
            rate, slow = self.pop.load.at(self.t)
            for _ in range(_poisson(rng, rate)):
                self._request(rng, slow)
            if self.record and self.t % SCRAPE_S == 0:
                self.scrapes.append((self.t, exported_lines(self.metrics)))

    def rewind(self, t: int) -> None:
        """Back to second ``t``: counters, voices, shadow pairs and scrapes as they were."""
        keep = [entry for entry in self.log if entry[0] <= t]
        self.metrics = GatewayMetrics(voices_per_step=self.cap)
        for _, call, kwargs in keep:
            getattr(self.metrics, call)(**kwargs)
        self.log, self.t = keep, t
        self.scrapes = [s for s in self.scrapes if s[0] <= t]
        self.shadow_pairs = [p for p in self.shadow_pairs if p[0] <= t]
        self.candidate_requests = self.candidate_requests_at(t)

    def candidate_requests_at(self, t: float) -> int:
        """Requests the candidate answered for users (canary route) up to second ``t``."""
        return sum(
            1
            for s, call, kw in self.log
            if s <= t and call == "observe" and kw["route"] == "canary"
        )

    def _call(self, call: str, **kwargs: Any) -> None:
        getattr(self.metrics, call)(**kwargs)
        if self.record:
            self.log.append((self.t, call, kwargs))

    def _request(self, rng: random.Random, slow: float) -> None:
        pop, state, names = self.pop, self.state, self.names
        who = bisect.bisect(self.cum, rng.random() * self.cum[-1])
        client = self.clients[who]
        decision = route(state, client, rng)
        canary = decision.route == "canary"
        v = self.cand if canary else Version()
        z, u, vote_u, up_u = rng.gauss(0, 1), rng.random(), rng.random(), rng.random()
        base = pop.median_latency_s * client.latency * slow * math.exp(pop.latency_sigma * z)
        latency = base * v.latency * (v.tail if z > 1.88 else 1.0)  # 1.88: a request's top 3 %
        error = u < pop.base_error * client.error * v.errors
        voter = voter_of(self.metrics, client)
        epoch = epoch_of(state)
        where = {"route": decision.route, "workload": names.workload}
        self._call(
            "observe",
            model=decision.version,
            seconds=latency,
            error=error,
            voter=voter,
            epoch=epoch,
            **where,
        )
        if self.meter_cost and not error:  # only for the cost rail: metering is the sim's cost
            compute = 0.05 * v.cost * math.exp(0.2 * z)
            self._call(
                "cost",
                model=decision.version,
                tokens_in=200,
                tokens_out=100,
                compute_s=compute,
                **where,
            )
        self.candidate_requests += canary
        if decision.shadow_version is not None:
            self._shadow(rng, client, voter, epoch, base, stable_error=error)
        hostile = pop.hostile_client and who == 0
        if error or not (hostile or vote_u < pop.vote_rate):
            return
        up = not hostile and up_u < client.taste - v.feedback_drop
        self._call(
            "vote",
            model=decision.version,
            value=1 if up else -1,
            workload=names.workload,
            voter=voter,
            epoch=epoch,
        )

    def _shadow(
        self,
        rng: random.Random,
        client: Client,
        voter: int | None,
        epoch: Any,
        base: float,
        *,
        stable_error: bool,
    ) -> None:
        """A mirrored copy answered by the candidate (route ``shadow``), and the pair's live
        rewards: both answers to the same request share its difficulty, and each side's error
        is its own (``stable_error``: the user's stable call's; an A/A pair whose stable side
        never failed made an identical candidate 2 % worse in shadow)."""
        v, names = self.cand, self.names
        error = rng.random() < self.pop.base_error * client.error * v.errors
        self._call(
            "observe",
            model=names.candidate,
            route="shadow",
            seconds=base * v.latency,
            error=error,
            workload=names.workload,
            voter=voter,
            epoch=epoch,
        )
        q = rng.betavariate(4, 2)
        scores = (q + rng.gauss(0, 0.1), q + rng.gauss(0, 0.1) - v.reward_drop)
        pair = f"{names.release_id}-{self.t}-{len(self.shadow_pairs)}"
        at = datetime.fromtimestamp(self.t, UTC)  # the release's clock
        sides: tuple[tuple[Literal["stable", "shadow"], str, float], ...] = (
            ("stable", names.stable, scores[0]),
            ("shadow", names.candidate, scores[1]),
        )
        recs = [
            TraceRecord(
                trace_id=f"{pair}-{route}",
                prompt_group=pair,
                question="q",
                answer=f"{min(1.0, max(0.0, s)):.4f}",
                model_version=model,
                latency_s=base,
                created_at=at,
                route=route,
                pairing_id=pair,
                workload=names.workload,
                error_count=int(stable_error if route == "stable" else error),
            )
            for route, model, s in sides
        ]
        self.shadow_pairs.append((self.t, recs[0], recs[1]))


def exported_lines(metrics: GatewayMetrics) -> list[str]:
    """The sample lines of the gateway's exposition (what Prometheus scrapes from
    ``/admin/metrics``) that the release reads, with the ``job="gateway"`` label the scrape
    adds (the release's queries and rules read that job alone); ``_created`` samples left
    out."""
    out = []
    for line in metrics.render().decode().splitlines():
        if line.startswith(EXPORTED) and "_created{" not in line:
            name, brace, rest = line.partition("{")
            if brace:
                out.append(f'{name}{{job="gateway",{rest}')
            else:
                name, _, value = line.partition(" ")
                out.append(f'{name}{{job="gateway"}} {value}')
    return out


def _poisson(rng: random.Random, lam: float) -> int:
    if lam > 30:  # normal approximation: the product method underflows
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    k, p, limit = 0, 1.0, math.exp(-lam)
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1
