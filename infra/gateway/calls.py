"""What the gateway records about every upstream call (metrics and traces), and the routed
call both the JSON and the streaming path make: the decision's version first; a canary that
fails is counted as a canary error (and traced with ``error_count=1``) and the stable version
answers the user instead. A client's own bad request (refused with 400, 413 or 422 by the
stable version too) is answered with the upstream's status and message and is no version's
error (:func:`call_routed`)."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from infra.errors import UpstreamError
from infra.gateway.ids import PINNED
from infra.gateway.limits import capped_size
from infra.gateway.requester import request_key
from infra.gateway.voices import epoch_of
from infra.traces.conversation import DEFAULT_WORKLOAD
from infra.upstream.statuses import UpstreamRefused

if TYPE_CHECKING:
    from infra.gateway.chat_request import ChatRequest
    from infra.gateway.cohorts import StateWatcher
    from infra.gateway.feedback import TraceIds, TraceLabels
    from infra.gateway.metrics import GatewayMetrics
    from infra.gateway.tracing import TraceDispatcher
    from infra.upstream.upstreams import Completion, GenParams

log = logging.getLogger(__name__)

FEEDBACK_MODELS = 100_000  # trace id -> labels remembered for user_feedback_total
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Call:
    """One upstream call of a request, as it is counted and traced: the parsed request, the
    version that answers and its route, the sampling it is asked with, when it began (a
    ``perf_counter`` value, its latency clock), its prompt group (a diverse request's
    siblings share it) and its shadow pairing. Built once where the gateway has routed the
    request (:meth:`infra.gateway.service.Gateway.chat`); the stable version standing in
    for a canary, a shadow copy and a sibling are copies of it with their own fields."""

    req: ChatRequest
    version: str
    route: str
    params: GenParams
    started: float
    prompt_group: str
    pairing_id: str | None = None


class CallRecorder:
    """Metrics and traces of upstream calls; remembers which version answered each trace, and
    the release line that routed it (the feedback endpoint labels ``user_feedback_total`` with
    them)."""

    def __init__(
        self,
        *,
        watcher: StateWatcher,
        metrics: GatewayMetrics,
        dispatcher: TraceDispatcher,
        trace_ids: TraceIds,
        max_trace_chars: int,
    ) -> None:
        self.watcher = watcher
        self.metrics = metrics
        self.dispatcher = dispatcher
        self.trace_ids = trace_ids
        self.max_trace_chars = max_trace_chars
        # trace id -> (model, release line, voter, client key quota)
        self.trace_models: OrderedDict[str, TraceLabels] = OrderedDict()

    def new_trace_id(self) -> str:
        """A signed trace id (feedback is accepted only for these)."""
        return self.trace_ids.new()

    def line(self, workload: str | None) -> str:
        """The metric label of a request of ``workload``: the workload when it has a release of
        its own in the routing state (it routed the request), else ``default``."""
        if workload and workload != DEFAULT_WORKLOAD and workload in self.watcher.state.workloads:
            return workload
        return DEFAULT_WORKLOAD

    def voter(self, req: ChatRequest) -> int | None:
        """Who asked, as the voice series count users (:mod:`infra.gateway.voices`): the key
        the request was routed by (:func:`~infra.gateway.requester.request_key`), hashed once
        per request."""
        if req.voice == ():
            req.voice = self.metrics.ledger.voter(request_key(req))
        return req.voice if isinstance(req.voice, int) else None

    def observe(self, call: Call, *, error: bool, done: Completion | None = None) -> None:
        """Count one call and its latency since ``call.started`` (a ``perf_counter`` value),
        and its user as a voice of the release line's current step; ``done``: the answer,
        metered (tokens, and the model server's compute or else the call's seconds)."""
        req, version, route = call.req, call.version, call.route
        seconds = time.perf_counter() - call.started
        line = self.line(req.workload)
        if done is not None and not error:
            self.metrics.cost(
                model=version,
                route=route,
                workload=line,
                tokens_in=done.tokens_in,
                tokens_out=done.tokens_out,
                compute_s=seconds if done.compute_s is None else done.compute_s,
                batch_size=done.batch_size,
            )
        self.metrics.observe(
            model=version,
            route=route,
            seconds=seconds,
            error=error,
            workload=line,
            voter=self.voter(req),
            epoch=epoch_of(self.watcher.view(req.workload)),
            quota=req.quota,
        )

    def failed(self, call: Call, *, took: float | None = None) -> None:
        """Count and trace one failed call (``took``: its seconds, when it ended before
        now); its trace pairs with no shadow copy."""
        call = replace(call, pairing_id=None)
        if took is not None:
            call = replace(call, started=time.perf_counter() - took)
        self.observe(call, error=True)
        self.trace(call, trace_id=self.new_trace_id(), done=None)

    def client_refused(self, exc: UpstreamRefused) -> None:
        """Count a request refused as the client's own (by status only: no version)."""
        self.metrics.client_refused.labels(str(exc.status)).inc()

    def trace(self, call: Call, *, trace_id: str, done: Completion | None) -> None:
        """Hand one trace of ``call`` to the dispatcher (``done=None``: the call failed)."""
        req, version, route, params = call.req, call.version, call.route, call.params
        # feedback counts for the version only when routing chose it (a version named by an
        # operator must not move the series its alerts and rails read)
        model = PINNED if route == "pinned" else version
        self.trace_models[trace_id] = (
            model,
            self.line(req.workload),
            self.voter(req),
            req.quota,
        )
        if len(self.trace_models) > FEEDBACK_MODELS:
            self.trace_models.popitem(last=False)
        fields: dict[str, Any] = {
            "trace_id": trace_id,
            "session_id": req.session_id,
            "workload": req.workload,
            "messages": req.messages,
            "user_id": req.user_id,
            "prompt_group": call.prompt_group,
            "question": req.question,
            "contexts": req.contexts,
            "answer": done.text if done else "",
            "tool_calls": done.tool_calls if done else [],
            "model_version": version,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "latency_s": time.perf_counter() - call.started,
            "tokens_in": done.tokens_in if done else None,
            "tokens_out": done.tokens_out if done else None,
            "finish_reason": done.finish_reason if done else None,
            "error_count": 0 if done else 1,
            "created_at": datetime.now(UTC),
            "route": _trace_route(route, version, self.watcher.view(req.workload).stable),
            "pairing_id": call.pairing_id,
            "logprobs": done.logprobs if done else None,
        }
        cut, size = capped_size(fields, self.max_trace_chars)
        if cut:
            self.metrics.trace_truncated.inc()
        self.dispatcher.submit_trace(fields, size=size)


@dataclass(frozen=True, kw_only=True)
class Served(Generic[T]):
    """The result of a routed call and the call that gave it (the stable version's, when it
    stood in for a failed canary: its own latency clock, no shadow pairing)."""

    value: T
    call: Call


async def call_routed(
    ask: Callable[[str], Awaitable[T]], *, recorder: CallRecorder, call: Call
) -> Served[T]:
    """``ask(version)`` for the call's version; if that is the canary and it fails, the
    failure is counted and traced, and ``ask(stable)`` answers. Success is the caller's to
    count (a stream is counted when it ends).

    A refusal (HTTP 400, 413 or 422) is the client's when the stable version refuses the
    request too: a stable or pinned request's refusal is raised at once, uncounted; a canary's
    is put to the stable version, and counts as the canary's error only if stable answers
    (a candidate may refuse what stable accepts: a shorter context window, say). A refusal
    is never traced: nothing was answered and there is nothing to learn from.

    Raises:
        UpstreamRefused: the client's own request was refused (counted in
            ``flywheel_client_refused_total`` only).
        UpstreamError: the version that had to answer failed (already counted and logged).
    """
    version, route = call.version, call.route
    refused_after: float | None = None  # the canary's refusal: seconds it took
    try:
        return Served(value=await ask(version), call=call)
    except UpstreamRefused as exc:
        if route != "canary":
            recorder.client_refused(exc)
            raise
        refused_after = time.perf_counter() - call.started
    except UpstreamError as exc:
        recorder.failed(call)
        if route != "canary":
            log.warning("upstream %s failed: %s", version, exc)
            raise
    stable = recorder.watcher.view(call.req.workload).stable
    fallback = replace(
        call, version=stable, route="stable", started=time.perf_counter(), pairing_id=None
    )
    try:
        value = await ask(stable)
    except UpstreamRefused as exc:
        recorder.client_refused(exc)  # the canary's refusal, if any, was the client's too
        raise
    except UpstreamError as again:
        recorder.observe(fallback, error=True)
        log.warning("upstream %s failed: %s", stable, again)
        raise
    if refused_after is not None:  # stable accepted what the canary refused: the canary's
        recorder.failed(call, took=refused_after)
    return Served(value=value, call=fallback)


def _trace_route(route: str, version: str, stable: str) -> str:
    """The trace's route (``stable | canary | shadow``); a pinned request by its version."""
    if route == "pinned":
        return "stable" if version == stable else "canary"
    return route
