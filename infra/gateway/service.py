"""The request path: route, call the upstream(s), answer, and hand traces to the dispatcher.

- Shadow copies and non-returned diverse siblings run as background tasks that the user's
  request never awaits (at most ``MAX_BACKGROUND`` in flight; beyond that they are skipped).
- Diverse sampling (a ``diverse_fraction`` of routed, non-streaming requests): siblings at
  every ``diverse_temperatures`` value, in parallel, one prompt group; the user gets the first
  temperature's answer (the request's own temperature is overridden).
- A canary upstream that fails is counted as a canary error (and traced with
  ``error_count=1``); the user is answered by the stable version instead.
- A request naming a version (``model="v3"``) is pinned: no diverse sampling, no shadow, its
  metrics under ``route="pinned"``, traced as ``stable`` or ``canary`` by version.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from infra.errors import UpstreamError
from infra.gateway.chat import (
    ChatRequest,
    completion_body,
    error_response,
    json_response,
    response_headers,
    upstream_failed,
)
from infra.gateway.routing import Decision, StateWatcher, decide
from infra.gateway.streaming import stream_chat
from infra.gateway.upstreams import Completion, GenParams, UpstreamPool

if TYPE_CHECKING:
    from infra.gateway.metrics import GatewayMetrics
    from infra.gateway.tracing import TraceDispatcher
    from infra.settings import Settings

log = logging.getLogger(__name__)

MAX_BACKGROUND = 256  # shadow copies / siblings in flight; beyond this shadows are skipped
FEEDBACK_MODELS = 100_000  # trace id -> model remembered for user_feedback_total labels


class Gateway:
    def __init__(
        self,
        *,
        settings: Settings,
        watcher: StateWatcher,
        pool: UpstreamPool,
        metrics: GatewayMetrics,
        dispatcher: TraceDispatcher,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.watcher = watcher
        self.pool = pool
        self.metrics = metrics
        self.dispatcher = dispatcher
        self.rng = rng or random.Random()
        self.background: set[asyncio.Task[Any]] = set()
        self.trace_models: OrderedDict[str, str] = OrderedDict()
        self._known: set[str] = set()

    # -- helpers ---------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> bool:
        if len(self.background) >= MAX_BACKGROUND:
            coro.close()
            return False
        task = asyncio.create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return True

    def trace(
        self,
        req: ChatRequest,
        *,
        trace_id: str,
        version: str,
        route: str,
        params: GenParams,
        started: float,
        done: Completion | None,
        prompt_group: str,
        pairing_id: str | None = None,
    ) -> None:
        self.trace_models[trace_id] = version
        if len(self.trace_models) > FEEDBACK_MODELS:
            self.trace_models.popitem(last=False)
        self.dispatcher.submit_trace(
            {
                "trace_id": trace_id,
                "session_id": req.session_id,
                "user_id": req.user_id,
                "prompt_group": prompt_group,
                "question": req.question,
                "contexts": req.contexts,
                "answer": done.text if done else "",
                "tool_calls": done.tool_calls if done else [],
                "model_version": version,
                "temperature": params.temperature,
                "top_p": params.top_p,
                "latency_s": time.perf_counter() - started,
                "tokens_in": done.tokens_in if done else None,
                "tokens_out": done.tokens_out if done else None,
                "error_count": 0 if done else 1,
                "created_at": datetime.now(UTC),
                "route": _trace_route(route, version, self.watcher.state.stable),
                "pairing_id": pairing_id,
                "logprobs": done.logprobs if done else None,
            }
        )

    async def known_version(self, version: str) -> bool:
        state = self.watcher.state
        if version in self._known or version in (state.stable, state.candidate):
            return True
        if await asyncio.to_thread(self.pool.exists, version):
            self._known.add(version)
            return True
        return False

    # -- chat ------------------------------------------------------------------------------

    async def chat(self, req: ChatRequest) -> Response:
        started = time.perf_counter()
        decision = decide(
            self.watcher.state,
            model=req.model,
            sticky_key=req.user_id or req.session_id,
            rand=self.rng.random,
        )
        if decision.route == "pinned" and not await self.known_version(decision.version):
            return error_response(
                404,
                f"model {req.model!r} does not exist",
                kind="invalid_request_error",
                code="model_not_found",
            )
        params = req.params
        diverse = (
            not req.stream
            and decision.route != "pinned"
            and self.rng.random() < self.settings.gateway.diverse_fraction
            and bool(self.settings.gateway.diverse_temperatures)
        )
        if diverse:
            params = replace(params, temperature=self.settings.gateway.diverse_temperatures[0])
        pairing_id = None
        if decision.shadow_version is not None:
            pairing_id = uuid.uuid4().hex
            self.spawn(self.shadow(req, decision.shadow_version, params, pairing_id))
        if req.stream:
            return await stream_chat(self, req, decision, started, pairing_id)
        prompt_group = uuid.uuid4().hex
        if diverse:
            for temp in self.settings.gateway.diverse_temperatures[1:]:
                sibling = replace(params, temperature=temp)
                self.spawn(self.sibling(req, decision, sibling, prompt_group, started))
        return await self.answer(req, decision, params, started, prompt_group, pairing_id)

    async def answer(
        self,
        req: ChatRequest,
        decision: Decision,
        params: GenParams,
        started: float,
        prompt_group: str,
        pairing_id: str | None,
    ) -> Response:
        version, route = decision.version, decision.route
        trace_id = uuid.uuid4().hex
        t0 = started
        try:
            done = await self.pool.get(version).complete(req.messages, params)
        except UpstreamError as exc:
            self.metrics.observe(
                model=version, route=route, seconds=time.perf_counter() - t0, error=True
            )
            self.trace(
                req,
                trace_id=trace_id,
                version=version,
                route=route,
                params=params,
                started=t0,
                done=None,
                prompt_group=prompt_group,
            )
            if route != "canary":
                log.warning("upstream %s failed: %s", version, exc)
                return upstream_failed(exc)
            # the canary's failure is counted above; the user is served by the stable version
            version, route, pairing_id = self.watcher.state.stable, "stable", None
            trace_id, t0 = uuid.uuid4().hex, time.perf_counter()
            try:
                done = await self.pool.get(version).complete(req.messages, params)
            except UpstreamError as again:
                self.metrics.observe(
                    model=version, route=route, seconds=time.perf_counter() - t0, error=True
                )
                log.warning("upstream %s failed: %s", version, again)
                return upstream_failed(again)
        self.metrics.observe(
            model=version, route=route, seconds=time.perf_counter() - t0, error=False
        )
        self.trace(
            req,
            trace_id=trace_id,
            version=version,
            route=route,
            params=params,
            started=started,
            done=done,
            prompt_group=prompt_group,
            pairing_id=pairing_id,
        )
        body = completion_body(done, trace_id=trace_id, version=version)
        return json_response(body, headers=response_headers(trace_id, version, route))

    async def sibling(
        self, req: ChatRequest, decision: Decision, params: GenParams, group: str, started: float
    ) -> None:
        """A diverse-sampling sibling: traced in the same prompt group, never returned."""
        done: Completion | None = None
        try:
            done = await self.pool.get(decision.version).complete(req.messages, params)
        except UpstreamError as exc:
            log.debug("diverse sibling on %s failed: %s", decision.version, exc)
        self.trace(
            req,
            trace_id=uuid.uuid4().hex,
            version=decision.version,
            route=decision.route,
            params=params,
            started=started,
            done=done,
            prompt_group=group,
        )

    async def shadow(self, req: ChatRequest, version: str, params: GenParams, pairing: str) -> None:
        """The candidate's copy of a stable request, traced with the shared pairing id."""
        t0 = time.perf_counter()
        done: Completion | None = None
        try:
            done = await self.pool.get(version).complete(req.messages, params)
        except UpstreamError as exc:
            log.debug("shadow on %s failed: %s", version, exc)
        self.metrics.observe(
            model=version, route="shadow", seconds=time.perf_counter() - t0, error=done is None
        )
        self.trace(
            req,
            trace_id=uuid.uuid4().hex,
            version=version,
            route="shadow",
            params=params,
            started=t0,
            done=done,
            prompt_group=uuid.uuid4().hex,
            pairing_id=pairing,
        )

    async def drain(self, timeout_s: float = 2.0) -> None:
        """Let background shadows/siblings finish briefly at shutdown, then cancel them."""
        if self.background:
            _done, pending = await asyncio.wait(list(self.background), timeout=timeout_s)
            for task in pending:
                task.cancel()


def _trace_route(route: str, version: str, stable: str) -> str:
    """The trace's route (``stable | canary | shadow``); a pinned request by its version."""
    if route == "pinned":
        return "stable" if version == stable else "canary"
    return route
