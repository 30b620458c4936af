"""The request path: route, call the upstream(s), answer, and hand traces to the dispatcher.

- Shadow copies and non-returned diverse siblings run as background tasks that the user's
  request never awaits (at most ``MAX_BACKGROUND`` in flight; beyond that they are skipped).
- Diverse sampling (a ``diverse_fraction`` of routed requests, streamed or not): siblings
  start once the user's own call has answered (never competing with it), one prompt group;
  the user gets the answer at their own temperature (or the first
  ``diverse_temperatures`` value when they named none), the siblings run at temperatures
  spread from it (:mod:`infra.gateway.diverse`) and are traced, not returned; siblings
  skipped because too many background calls are in flight are counted in
  ``flywheel_diverse_siblings_skipped_total``.
- A canary upstream that fails is counted as a canary error (and traced with
  ``error_count=1``); the user is answered by the stable version instead, streamed or not
  (:func:`infra.gateway.calls.call_routed`). A request the stable version refuses (400, 413,
  422) is the client's own: answered with that status and the model server's message, no
  version's error; a canary's or shadow's refusal of a request stable answered is theirs.
- A request naming a version (``model="v3"``) is pinned: no diverse sampling, no shadow, its
  metrics under ``route="pinned"``, traced as ``stable`` or ``canary`` by version, and its
  feedback is not counted in ``user_feedback_total``. On the public listener only a released
  version (the shared stable version or a workload's own) may be named: any other is 404, as
  if it did not exist; the operator names any other on the admin listener (the admin token,
  :mod:`infra.gateway.fastpath`). A retired version (erased) is 404 even to the admin.
- Each request is routed by its workload (``X-Flywheel-Workload``, else ``metadata.workload``):
  a workload with a release of its own by that release (its stable version and its canary),
  any other by the shared routing (:meth:`infra.routing.RoutingState.for_workload`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Coroutine
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from infra.errors import UpstreamError
from infra.gateway.calls import Call, CallRecorder, call_routed
from infra.gateway.chat import (
    completion_body,
    error_response,
    json_response,
    response_headers,
    upstream_failed,
    upstream_refused,
    wants_logprobs,
)
from infra.gateway.chat_request import ChatRequest
from infra.gateway.cohorts import Decision, StateWatcher, decide
from infra.gateway.copies import run_shadow, run_sibling
from infra.gateway.diverse import sibling_temperatures
from infra.gateway.ids import random_hex
from infra.gateway.requester import request_key
from infra.gateway.streaming import stream_chat
from infra.upstream.statuses import UpstreamRefused
from infra.upstream.upstreams import Completion, GenParams, UpstreamPool

if TYPE_CHECKING:
    from infra.gateway.feedback import TraceIds
    from infra.gateway.metrics import GatewayMetrics
    from infra.gateway.tracing import TraceDispatcher
    from infra.routing import RoutingState
    from infra.settings import Settings

log = logging.getLogger(__name__)

MAX_BACKGROUND = 256  # shadow copies / siblings in flight; beyond this they are skipped


class Gateway:
    """The chat completions handler: routes each request, answers it, records and traces it."""

    def __init__(
        self,
        *,
        settings: Settings,
        watcher: StateWatcher,
        pool: UpstreamPool,
        metrics: GatewayMetrics,
        dispatcher: TraceDispatcher,
        trace_ids: TraceIds,
        rng: random.Random | None = None,
        routing_secret: bytes | None = None,
    ) -> None:
        self.settings = settings
        self.routing_secret = routing_secret  # the canary buckets' key; never logged
        self.watcher = watcher
        self.pool = pool
        self.recorder = CallRecorder(
            watcher=watcher,
            metrics=metrics,
            dispatcher=dispatcher,
            trace_ids=trace_ids,
            max_trace_chars=settings.gateway.max_trace_chars,
        )
        self.rng = rng or random.Random()
        self.background: set[asyncio.Task[Any]] = set()
        self._known: set[str] = set()

    # -- helpers ---------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> bool:
        """Run ``coro`` in the background; False (and ``coro`` closed) when ``MAX_BACKGROUND`` tasks
        are already running."""
        if len(self.background) >= MAX_BACKGROUND:
            coro.close()
            return False
        task = asyncio.create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return True

    async def known_version(self, version: str) -> bool:
        """Whether ``version`` can be served (routed, configured or in the store); a yes is
        remembered."""
        state = self.watcher.state
        if version in self._known or version in (state.stable, state.candidate):
            return True
        if await asyncio.to_thread(self.pool.exists, version):
            self._known.add(version)
            return True
        return False

    async def refuse(
        self,
        decision: Decision,
        *,
        state: RoutingState,
        model: str,
        admin: bool,
        released: set[str] | None = None,
    ) -> Response | None:
        """Why this request gets no answer (a 404 or 503 response), or None. ``state`` is the
        routing of the request's workload. Public clients reach its stable version and canary
        through routing and a released version by name (``released``, the stable versions of
        every workload; default: ``state``'s); any other version by name needs the admin
        token; a retired (erased) version is never served."""
        retired = retired_versions(state)
        if decision.route != "pinned":
            if state.stable in retired:
                return error_response(
                    503, "no version can be served now", kind="service_unavailable"
                )
            return None
        public = decision.version == state.stable or decision.version in (released or ())
        if decision.version in retired or not (admin or public):
            return _not_found(f"model {model!r} does not exist")
        if not await self.known_version(decision.version):
            return _not_found(f"model {model!r} does not exist")
        return None

    # -- chat ------------------------------------------------------------------------------

    async def chat(self, req: ChatRequest, *, admin: bool = False) -> Response:
        """Answer one request; ``admin``: the caller showed the admin token on the admin
        listener, so it may name any version that is not retired (a candidate, an old or a rolled-back one), and its answer
        names the version and route that served it (no public answer does)."""
        started = time.perf_counter()
        state = self.watcher.view(req.workload)
        decision = decide(
            state,
            model=req.model,
            sticky_key=request_key(req),  # the key its voice is counted by, too
            rand=self.rng.random,
            secret=self.routing_secret,
        )
        refused = await self.refuse(
            decision,
            state=state,
            model=req.model,
            admin=admin,
            released=released_versions(self.watcher.state) if decision.route == "pinned" else None,
        )
        if refused is not None:
            return refused
        decision = servable(decision, state)
        params, sibling_params = self.sampling(req, decision)
        pairing_id = None
        stable_answered: asyncio.Future[bool] | None = None  # what the shadow's refusal means
        if decision.shadow_version is not None:
            pairing_id = random_hex()
            stable_answered = asyncio.get_running_loop().create_future()
        call = Call(
            req=req,
            version=decision.version,
            route=decision.route,
            params=params,
            started=started,
            prompt_group=random_hex(),
            pairing_id=pairing_id,
        )
        if decision.shadow_version is not None:
            shadow = replace(
                call, version=decision.shadow_version, route="shadow", prompt_group=random_hex()
            )
            self.spawn(run_shadow(self.pool, self.recorder, shadow, stable_answered))
        siblings = (
            partial(self.spawn_siblings, call, sibling_params)
            if sibling_params is not None
            else None
        )
        answered = False
        try:
            if req.stream:
                response = await stream_chat(
                    call,
                    pool=self.pool,
                    recorder=self.recorder,
                    reveal=admin,
                    # a stream's siblings start once it has ended well: not at its first token
                    # (they would compete with it), never for a client that hung up
                    on_end=(lambda ok: ok and siblings()) if siblings is not None else None,
                )
            else:
                response = await self.answer(call, reveal=admin)
            answered = response.status_code == 200
        finally:
            if stable_answered is not None:
                stable_answered.set_result(answered)
        if siblings is not None and answered and not req.stream:
            siblings()
        return response

    def sampling(
        self, req: ChatRequest, decision: Decision
    ) -> tuple[GenParams, list[GenParams] | None]:
        """The params the user is answered with, and its diverse-sampling siblings' (None: the
        request is not sampled; a pinned request never is)."""
        params = req.params
        gw = self.settings.gateway
        diverse = (
            (not req.stream or gw.diverse_fraction > 0)
            and decision.route != "pinned"
            and self.rng.random() < gw.diverse_fraction
            and bool(gw.diverse_temperatures)
        )
        if not diverse:
            return params, None
        temperatures = sibling_temperatures(params.temperature, gw.diverse_temperatures)
        first, rest = temperatures[0], temperatures[1:]
        return replace(params, temperature=first), [replace(params, temperature=t) for t in rest]

    def spawn_siblings(self, call: Call, params: list[GenParams]) -> None:
        """Start the diverse-sampling siblings of an answered request's ``call`` (each at its
        own ``params``, in its prompt group), never awaited: once the user's own call has
        answered (its reply goes out before they run), so they never compete with it. A
        request refused or failed gets none (they would only fail or be refused likewise)."""
        for sibling in params:
            copy = replace(call, params=sibling, started=time.perf_counter(), pairing_id=None)
            if not self.spawn(run_sibling(self.pool, self.recorder, copy)):
                self.recorder.metrics.siblings_skipped.inc()

    async def answer(self, call: Call, *, reveal: bool = False) -> Response:
        """Answer a non-streaming ``call`` from its version (the stable one if the canary
        fails), record and trace it; 502 when no version answered. ``reveal``: the response
        names the version and route that served it (a request with the admin token)."""
        req, params = call.req, call.params

        async def complete(version: str) -> Completion:
            return await self.pool.get(version).complete(req.messages, params)

        try:
            served = await call_routed(complete, recorder=self.recorder, call=call)
        except UpstreamRefused as exc:
            return upstream_refused(exc)
        except UpstreamError as exc:
            return upstream_failed(exc)
        self.recorder.observe(served.call, error=False, done=served.value)
        trace_id = self.recorder.new_trace_id()
        # the trace's latency is the answering call's, as a stream's: a failed canary's time
        # is the canary's failure trace's, never the stable answer's (its reward's latency)
        self.recorder.trace(served.call, trace_id=trace_id, done=served.value)
        body = completion_body(
            served.value, trace_id=trace_id, model=req.model, logprobs=wants_logprobs(req)
        )
        shown = (served.call.version, served.call.route) if reveal else None
        return json_response(body, headers=response_headers(trace_id, served=shown))

    async def drain(self, timeout_s: float = 2.0) -> None:
        """Let background shadows/siblings finish briefly at shutdown, then cancel them."""
        if self.background:
            _done, pending = await asyncio.wait(list(self.background), timeout=timeout_s)
            for task in pending:
                task.cancel()


def retired_versions(state: RoutingState) -> set[str]:
    """Versions never served again (erased models); empty on a state without the list."""
    return set(getattr(state, "retired", None) or ())


def released_versions(state: RoutingState) -> set[str]:
    """The versions released to users: the shared stable version and every workload's own."""
    return {state.stable} | {w.stable for w in state.workloads.values() if w.stable}


def servable(decision: Decision, state: RoutingState) -> Decision:
    """``decision`` without a retired canary or shadow (the stable version answers instead)."""
    retired = retired_versions(state)
    if not retired or decision.route == "pinned":
        return decision
    if decision.route == "canary" and decision.version in retired:
        return Decision(version=state.stable, route="stable")
    if decision.shadow_version in retired:
        return replace(decision, shadow_version=None)
    return decision


def _not_found(message: str) -> Response:
    return error_response(404, message, kind="invalid_request_error", code="model_not_found")
