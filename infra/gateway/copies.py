"""Calls that answer no one: a shadow copy of a stable request (the candidate's answer to it,
paired with stable's for the shadow analysis) and diverse-sampling siblings (more answers to
a routed request, for training). Both run in the background (:meth:`Gateway.spawn
<infra.gateway.service.Gateway.spawn>`) and are traced; only shadow copies are counted."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from infra.errors import UpstreamError
from infra.upstream.statuses import UpstreamRefused

if TYPE_CHECKING:
    from infra.gateway.calls import Call, CallRecorder
    from infra.upstream.upstreams import Completion, UpstreamPool

log = logging.getLogger(__name__)


async def run_sibling(pool: UpstreamPool, recorder: CallRecorder, call: Call) -> None:
    """A diverse-sampling sibling (``call``: its version, params and prompt group): traced,
    never returned."""
    done: Completion | None = None
    try:
        done = await pool.get(call.version).complete(call.req.messages, call.params)
    except UpstreamError as exc:
        log.debug("diverse sibling on %s failed: %s", call.version, exc)
    recorder.trace(call, trace_id=recorder.new_trace_id(), done=done)


async def run_shadow(
    pool: UpstreamPool,
    recorder: CallRecorder,
    call: Call,
    stable_answered: asyncio.Future[bool] | None = None,
) -> None:
    """The candidate's copy of a stable request (``call``: the candidate, route ``shadow``,
    the stable call's pairing id), counted and traced from when it starts. A refusal (400,
    413, 422) is the shadow's error only when the stable version answered the request
    (``stable_answered``): else it was the client's, and is neither counted nor traced."""
    t0 = time.perf_counter()
    version = call.version
    done: Completion | None = None
    try:
        done = await pool.get(version).complete(call.req.messages, call.params)
    except UpstreamRefused as exc:
        took = time.perf_counter() - t0
        if stable_answered is not None and not await stable_answered:
            return
        log.debug("shadow on %s refused what stable answered: %s", version, exc)
        t0 = time.perf_counter() - took
    except UpstreamError as exc:
        log.debug("shadow on %s failed: %s", version, exc)
    call = replace(call, started=t0)
    recorder.observe(call, error=done is None, done=done)
    recorder.trace(call, trace_id=recorder.new_trace_id(), done=done)
