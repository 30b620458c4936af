"""Gateway metrics with the documented names (docs/operating/monitoring.md; the alert rules
use them), on a per-app registry; what each listener's ``/metrics`` shows of them is
:mod:`infra.gateway.exposition`.
"""

from __future__ import annotations

import bisect
import os
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from infra.gateway.exposition import PublicOnly
from infra.gateway.voices import Epoch, Quota, VoiceLedger
from infra.metrics.cost import batch_bucket
from infra.retries import RETRIES
from infra.routing import RoutingState
from infra.traces.conversation import DEFAULT_WORKLOAD

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
USER_ROUTES = ("stable", "canary")  # the routes that answer users (not shadow, not pinned)
CANDIDATE_ROUTES = ("canary", "shadow")
FEEDBACK_VALUES = ("1", "0", "-1")
SERIES = ("model", "route", "workload")  # the labels of every per-version series
VOTES = ("model", "value", "workload")  # the feedback series' labels
# about 1.2-1.33x apart from 0.1 to 10 s, where p99s fall: the canary's p99 rail counts the
# requests over the bounds next to stable's p99 (tasks/release/canary/latency.py), and bounds 2-2.5x
# apart hid a tail 1.6x slower inside one bucket; 27 buckets a series (the 0.25, 0.5, 1, 2.5 s
# bounds of old kept, for dashboards), 13 more than before per model, route and workload
LATENCY_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75, 1.0, 1.25),
    *(1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.5, 10.0, 30.0, 60.0),
)
# the bounds of agent_slow_voices_total's ``over`` label (users with a request slower), written
# as the latency histogram writes its ``le``
SLOW_BOUNDS = tuple(floatToGoString(b) for b in LATENCY_BUCKETS)


class GatewayMetrics:
    """``agent_requests_total{model,route,workload}``, ``agent_errors_total{model,route,workload}``,
    ``agent_latency_seconds{model,route,workload}``, ``user_feedback_total{model,value,workload}``,
    ``flywheel_route_weight{model}``, ``flywheel_trace_sink_dropped_total``,
    ``flywheel_trace_truncated_total``, ``flywheel_feedback_changed_total{model}``,
    ``flywheel_feedback_refused_total``, ``flywheel_diverse_siblings_skipped_total``,
    ``flywheel_workload_unconfigured_total`` (requests naming a workload that is not configured;
    the name is never a label),
    ``flywheel_client_refused_total{status}``,
    ``flywheel_connections_refused_total{limit}`` (connections answered 503 at the public
    listener's connection limit: ``client``, one peer's, or ``total``),
    ``flywheel_retries_total{operation}`` (this process's retries, brought up to date on render),
    ``agent_cost_requests_total``, ``agent_tokens_total{direction}`` and
    ``agent_compute_seconds_total`` (``model,route,workload``: serving cost,
    :mod:`infra.metrics.cost`; requests and compute also by ``batch``, the bucket of answers
    generated together).

    ``route`` is ``stable``, ``canary``, ``shadow`` or ``pinned`` (an explicit version asked for
    by name, e.g. by the release gate: kept apart so it never skews canary analysis). One
    request count per user request (plus one per shadow copy, ``route="shadow"``); diverse
    siblings that are not returned are traced, not counted. ``user_feedback_total``'s ``value``
    is ``"1"``, ``"0"`` or ``"-1"``; its ``model`` is the version that served the trace
    (``unknown`` for a trace id this gateway process did not serve); each trace counts once,
    with its first vote (see :mod:`infra.gateway.feedback`). ``workload`` is the release line
    that routed the request: a workload with a release of its own in the routing state, else
    ``default`` (the shared routing). Never the client's string as such: only workloads an
    operator released become labels, so a client cannot grow the series. A workload's canary
    analysis reads its own series alone.

    The canary's tests read the voice series instead (``agent_voices_total``,
    ``agent_error_voices_total``, ``user_feedback_voices_total``, same labels, and
    ``agent_slow_voices_total`` with ``over``, a latency bound): users, not
    events, each counted at most ``voices_per_step`` times per step (:mod:`infra.gateway.voices`).
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, voices_per_step: int = 1
    ) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.ledger = VoiceLedger(cap=voices_per_step)
        self._voice_metrics(r)
        self._traffic_metrics(r)
        self._cost_metrics(r)
        self._operational_metrics(r)
        self._retries_seen: dict[str, int] = {}
        self._weighted: set[str] = set()
        self._public: set[str] = set()  # the stable versions: all the public exposition names
        # (model, route, workload) -> its label children: labels() hashes and locks per call
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    def _voice_metrics(self, r: CollectorRegistry) -> None:
        """The canary's unit: users, each counted at most ``voices_per_step`` times a step."""
        self.voices = Counter(
            "agent_voices_total", "Users served, each once per step.", SERIES, registry=r
        )
        self.error_voices = Counter(
            "agent_error_voices_total",
            "Users whose request failed, each once per step.",
            SERIES,
            registry=r,
        )
        self.feedback_voices = Counter(
            "user_feedback_voices_total",
            "User feedback, each user's first vote per step.",
            VOTES,
            registry=r,
        )
        self.slow_voices = Counter(
            "agent_slow_voices_total",
            "Users who had a request slower than `over` seconds, each once per bound and step.",
            [*SERIES, "over"],
            registry=r,
        )
        self.voices_capped = Counter(
            "flywheel_voices_capped_total",
            "Voices not counted: their client key had added its cap to the step.",
            registry=r,
        )
        self.voices_dropped = Counter(
            "flywheel_voices_dropped_total",
            "Users not counted as voices: the ledger of a step was full.",
            registry=r,
        )

    def _traffic_metrics(self, r: CollectorRegistry) -> None:
        """Requests, errors, latency and feedback events per version, route and workload."""
        self.requests = Counter(
            "agent_requests_total",
            "Chat requests answered.",
            SERIES,
            registry=r,
        )
        self.errors = Counter(
            "agent_errors_total",
            "Chat requests that failed.",
            SERIES,
            registry=r,
        )
        self.latency = Histogram(
            "agent_latency_seconds",
            "Chat request latency.",
            SERIES,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.feedback = Counter(
            "user_feedback_total",
            "User feedback events.",
            VOTES,
            registry=r,
        )

    def _cost_metrics(self, r: CollectorRegistry) -> None:
        """Serving cost, measured (:mod:`infra.metrics.cost`): answered requests, tokens and
        compute seconds; requests and compute by the batch the answer was generated in
        (``batch_bucket``)."""
        self.cost_requests = Counter(
            "agent_cost_requests_total",
            "Requests answered and metered.",
            [*SERIES, "batch"],
            registry=r,
        )
        self.tokens = Counter(
            "agent_tokens_total",
            "Tokens of answered requests: prompt (direction=in) and answer (out).",
            [*SERIES, "direction"],
            registry=r,
        )
        self.compute = Counter(
            "agent_compute_seconds_total",
            "Model-server compute seconds of answered requests (in process: the answer's share "
            "of its batch; HTTP upstreams: the call's seconds).",
            [*SERIES, "batch"],
            registry=r,
        )

    def _operational_metrics(self, r: CollectorRegistry) -> None:
        """What an operator watches: weights, refusals, drops and retries."""
        self.route_weight = Gauge(
            "flywheel_route_weight",
            "Share of routed traffic in percent.",
            ["model"],
            registry=r,
            multiprocess_mode="livemostrecent",  # every worker sets the same weights
        )
        self.client_refused = Counter(
            "flywheel_client_refused_total",
            "Requests the model server refused as the client's own (400, 413 or 422 from the "
            "stable version too): answered with that status, no version's error.",
            ["status"],
            registry=r,
        )
        self.connections_refused = Counter(
            "flywheel_connections_refused_total",
            "Public connections answered 503 at a connection limit (FLYWHEEL_GATEWAY__"
            "MAX_CONNECTIONS_PER_CLIENT: limit=client, __MAX_CONNECTIONS: limit=total).",
            ["limit"],
            registry=r,
        )
        self.sink_dropped = Counter(
            "flywheel_trace_sink_dropped_total",
            "Traces and feedback events dropped (queue full or sink failed).",
            registry=r,
        )
        self.trace_truncated = Counter(
            "flywheel_trace_truncated_total",
            "Traces whose text was cut to FLYWHEEL_GATEWAY__MAX_TRACE_CHARS.",
            registry=r,
        )
        self.feedback_changed = Counter(
            "flywheel_feedback_changed_total",
            "Votes that replaced an earlier vote on the same trace (not counted again).",
            ["model"],
            registry=r,
        )
        self.feedback_refused = Counter(
            "flywheel_feedback_refused_total",
            "Feedback refused: the trace id was not one this gateway handed out.",
            registry=r,
        )
        self.workload_unconfigured = Counter(
            "flywheel_workload_unconfigured_total",
            "Requests naming a workload FLYWHEEL_WORKLOADS does not list (the shared release's).",
            registry=r,
        )
        self.siblings_skipped = Counter(
            "flywheel_diverse_siblings_skipped_total",
            "Diverse-sampling siblings not sent: too many background calls in flight.",
            registry=r,
        )
        self.retries = Counter(
            "flywheel_retries_total",
            "Retries of transient I/O failures in the gateway, by operation.",
            ["operation"],
            registry=r,
        )

    def observe(
        self,
        *,
        model: str,
        route: str,
        seconds: float,
        error: bool,
        workload: str = DEFAULT_WORKLOAD,
        voter: int | None = None,
        epoch: Epoch = (),
        quota: Quota | None = None,
    ) -> None:
        """Count one request of ``model`` on ``route`` with its latency, and an error if it
        failed; ``workload``: the release line that routed it (see the class docstring);
        ``voter`` and ``epoch``: who asked, and the line's step, for the voice series;
        ``quota``: the voices its client key may add (:mod:`infra.gateway.keyring`)."""
        key = (model, route, workload)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                self.requests.labels(*key),
                self.latency.labels(*key),
            )
        children[0].inc()
        children[1].observe(seconds)
        if error:
            self.errors.labels(*key).inc()
        if self._admit(workload, epoch, voter, model, route, quota):
            self.voices.labels(*key).inc()
        if error and self._admit(workload, epoch, voter, model, "error:" + route, quota):
            self.error_voices.labels(*key).inc()
        if voter is not None and seconds > LATENCY_BUCKETS[0]:
            over = bisect.bisect_left(LATENCY_BUCKETS, seconds)  # bounds it is slower than
            admission, new = self.ledger.slower(
                line=workload,
                epoch=epoch,
                voter=voter,
                model=model,
                route=route,
                over=over,
                quota=quota,
            )
            self._count_admission(admission)
            for i in new:
                self.slow_voices.labels(*key, SLOW_BOUNDS[i]).inc()

    def cost(
        self,
        *,
        model: str,
        route: str,
        workload: str,
        tokens_in: int | None,
        tokens_out: int | None,
        compute_s: float,
        batch_size: int | None = None,
    ) -> None:
        """Meter one answered request of ``model`` (see :mod:`infra.metrics.cost`), its requests and
        compute under the bucket of ``batch_size`` (the answers generated with it)."""
        key = (model, route, workload)
        batch = batch_bucket(batch_size)
        self.cost_requests.labels(*key, batch).inc()
        self.tokens.labels(*key, "in").inc(tokens_in or 0)
        self.tokens.labels(*key, "out").inc(tokens_out or 0)
        self.compute.labels(*key, batch).inc(max(0.0, compute_s))

    def vote(
        self,
        *,
        model: str,
        value: int,
        workload: str,
        voter: int | None,
        epoch: Epoch,
        quota: Quota | None = None,
    ) -> None:
        """Count one first vote on a trace of ``model`` (``user_feedback_total``), and as a
        voice when it is the voter's first in the line's step."""
        self.feedback.labels(model, str(value), workload).inc()
        if self._admit(workload, epoch, voter, model, "feedback", quota):
            self.feedback_voices.labels(model, str(value), workload).inc()

    def _admit(
        self,
        line: str,
        epoch: Epoch,
        voter: int | None,
        model: str,
        kind: str,
        quota: Quota | None = None,
    ) -> bool:
        admission = self.ledger.admit(
            line=line, epoch=epoch, voter=voter, model=model, kind=kind, quota=quota
        )
        self._count_admission(admission)
        return admission == "counted"

    def _count_admission(self, admission: str) -> None:
        if admission == "dropped":
            self.voices_dropped.inc()
        elif admission == "capped":
            self.voices_capped.inc()

    def set_routing(self, state: RoutingState) -> None:
        """Route weights from the state (a workload's own candidate: its share of that
        workload's traffic); versions no longer routed drop to 0."""
        weights = {state.stable: 100.0}
        cand = state.routable_candidate()
        if cand is not None:
            weights[state.stable] = 100.0 - state.weight
            weights[cand] = state.weight
        for name in state.workloads:
            view = state.release_of(name)
            if (own := view.routable_candidate()) is not None and own not in weights:
                weights[own] = view.weight
        for model in self._weighted - weights.keys():
            self.route_weight.labels(model).set(0.0)
        for model, weight in weights.items():
            self.route_weight.labels(model).set(weight)
        self._weighted |= weights.keys()
        # the versions the public may see named: the stable ones
        public = {state.stable} | {state.release_of(name).stable for name in state.workloads}
        self._public = public
        self._zero_candidates(state)

    def _zero_candidates(self, state: RoutingState) -> None:
        """Create each release line's candidate series at 0 (its canary and shadow routes,
        every feedback value) before its first request: Prometheus's increase() counts no
        series' first sample, so a candidate whose series appeared with its first error would
        have that error missed by the alert rules."""
        lines = [(DEFAULT_WORKLOAD, state.routable_candidate())]
        lines += [(name, state.release_of(name).routable_candidate()) for name in state.workloads]
        for workload, cand in lines:
            if cand is None:
                continue
            for route in CANDIDATE_ROUTES:
                for counter in (self.requests, self.errors, self.voices, self.error_voices):
                    counter.labels(cand, route, workload)
                self.latency.labels(cand, route, workload)
                for bound in SLOW_BOUNDS:
                    self.slow_voices.labels(cand, route, workload, bound)
            for value in FEEDBACK_VALUES:
                self.feedback.labels(cand, value, workload)
                self.feedback_voices.labels(cand, value, workload)

    def render(self, *, public: bool = False) -> bytes:
        """The exposition (``public``: no route, no weight, no version but the stable ones, see
        the module docstring); with several worker processes
        (``PROMETHEUS_MULTIPROC_DIR`` set by :mod:`infra.gateway.workers`) the sum over all of
        them, whichever worker answers."""
        for operation, n in RETRIES.since(self._retries_seen).items():
            self.retries.labels(operation).inc(n)
        source: Collector = self.registry
        if os.environ.get(MULTIPROC_ENV):
            from prometheus_client import multiprocess

            source = CollectorRegistry()
            multiprocess.MultiProcessCollector(source)
        return generate_latest(PublicOnly(source, self._public) if public else source)
