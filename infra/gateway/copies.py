"""Calls that answer no one: a shadow copy of a stable request (the candidate's answer to it,
paired with stable's for the shadow analysis) and diverse-sampling siblings (more answers to
a routed request, for training). Both run in the background (:meth:`Gateway.spawn
<infra.gateway.service.Gateway.spawn>`) and are traced; only shadow copies are counted."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from infra.errors import UpstreamError
from infra.gateway.ids import random_hex
from infra.upstream.statuses import UpstreamRefused

if TYPE_CHECKING:
    from infra.gateway.calls import CallRecorder
    from infra.gateway.chat_request import ChatRequest
    from infra.gateway.cohorts import Decision
    from infra.upstream.upstreams import Completion, GenParams, UpstreamPool

log = logging.getLogger(__name__)


async def run_sibling(
    pool: UpstreamPool,
    recorder: CallRecorder,
    req: ChatRequest,
    *,
    decision: Decision,
    params: GenParams,
    group: str,
    started: float,
) -> None:
    """A diverse-sampling sibling: traced in the same prompt group, never returned."""
    done: Completion | None = None
    try:
        done = await pool.get(decision.version).complete(req.messages, params)
    except UpstreamError as exc:
        log.debug("diverse sibling on %s failed: %s", decision.version, exc)
    recorder.trace(
        req,
        trace_id=recorder.new_trace_id(),
        version=decision.version,
        route=decision.route,
        params=params,
        started=started,
        done=done,
        prompt_group=group,
    )


async def run_shadow(
    pool: UpstreamPool,
    recorder: CallRecorder,
    req: ChatRequest,
    *,
    version: str,
    params: GenParams,
    pairing: str,
    stable_answered: asyncio.Future[bool] | None = None,
) -> None:
    """The candidate's copy of a stable request, traced with the shared pairing id. A
    refusal (400, 413, 422) is the shadow's error only when the stable version answered
    the request (``stable_answered``): else it was the client's, and is neither counted
    nor traced."""
    t0 = time.perf_counter()
    done: Completion | None = None
    try:
        done = await pool.get(version).complete(req.messages, params)
    except UpstreamRefused as exc:
        took = time.perf_counter() - t0
        if stable_answered is not None and not await stable_answered:
            return
        log.debug("shadow on %s refused what stable answered: %s", version, exc)
        t0 = time.perf_counter() - took
    except UpstreamError as exc:
        log.debug("shadow on %s failed: %s", version, exc)
    recorder.observe(
        version=version, route="shadow", started=t0, error=done is None, req=req, done=done
    )
    recorder.trace(
        req,
        trace_id=recorder.new_trace_id(),
        version=version,
        route="shadow",
        params=params,
        started=t0,
        done=done,
        prompt_group=random_hex(),
        pairing_id=pairing,
    )
