"""Dynamic micro-batching for the in-process model: concurrent requests share one forward pass.

The in-process model generates one batch at a time (one lock, one core); a batch of 16 short
answers costs little more than one. :class:`MicroBatcher` queues the prompts of concurrent
``complete`` calls and hands them to one ``generate`` call: the first waits at most
``max_wait_s`` for company (so a lone request is barely delayed), a full batch goes at once,
and requests that arrive while a batch runs form the next one. Each row keeps its own
parameters and seed (:class:`infra.serving.local_lm.RowParams`), so batching never changes an
answer.

A failed batch fails only its own requests, each with an :class:`UpstreamError`; a client that
goes away is dropped from its batch (or its answer discarded) without disturbing the others.
The worker task lives only while requests are queued, in the loop of the requests it serves.

One batcher can serve several versions (the gateway's in-process versions share one, as vLLM
serves a base and its adapters from one engine): each request names its version's ``generate``
and ``group``; a batch takes the queued requests of every version (up to ``max_batch`` of each),
generates each version's rows in its own worker thread at the same time, and answers them all
when the last is done. A version's requests then wait as long as the other's, whatever share of
the traffic each has: with a queue per version, the version serving 90 % of a canary's users
formed batches of seven while stable's formed batches of one, and its slower answers read as a
slower model (a loop test's identical-latency candidate was rolled back on its p99 tail).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.errors import UpstreamError

if TYPE_CHECKING:
    from infra.serving.local_lm import Generation, RowParams

log = logging.getLogger(__name__)

GenerateRows = Callable[[list[str], list["RowParams"]], list["Generation"]]


@dataclass
class _Request:
    prompt: str
    row: RowParams
    future: asyncio.Future[Generation]
    generate: GenerateRows
    group: str  # the version: its rows are generated together, by its ``generate``


class MicroBatcher:
    """Runs queued generations together, up to ``max_batch`` rows per ``generate`` call.

    ``generate``: a blocking function from prompts and their parameters to one generation per
    prompt, in order (run in a worker thread); ``name`` prefixes error messages (the version).
    A shared batcher has no ``generate`` of its own: each :meth:`submit` names its version's.
    """

    def __init__(
        self,
        generate: GenerateRows | None = None,
        *,
        name: str,
        max_batch: int = 16,
        max_wait_s: float = 0.005,
    ) -> None:
        self.generate = generate
        self.name = name
        self.max_batch = max(1, max_batch)
        self.max_wait_s = max(0.0, max_wait_s)
        self.batches = 0  # generate calls made (for tests and benchmarks)
        self.rows = 0  # rows generated
        self._pending: list[_Request] = []
        self._running: list[_Request] = []
        self._wake: asyncio.Future[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def submit(
        self,
        prompt: str,
        row: RowParams,
        *,
        generate: GenerateRows | None = None,
        group: str | None = None,
    ) -> Generation:
        """The generation of ``prompt`` with ``row``'s parameters, batched with whatever else
        is queued (``generate`` and ``group``: the version's, on a shared batcher). Raises
        ``UpstreamError`` when its version's part of the batch fails."""
        generate = generate or self.generate
        if generate is None:
            raise TypeError("a shared batcher needs each request's generate")
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (tests): nothing of the old one carries
            self._loop, self._pending, self._worker, self._wake = loop, [], None, None
        future: asyncio.Future[Generation] = loop.create_future()
        self._pending.append(_Request(prompt, row, future, generate, group or self.name))
        wake = self._wake
        if len(self._pending) >= self.max_batch and wake is not None and not wake.done():
            wake.set_result(None)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain(), name=f"batcher-{self.name}")
        # a cancelled caller cancels its future: the worker skips it or discards its answer
        return await future

    async def _drain(self) -> None:
        """Form and run batches until the queue is empty, then end."""
        try:
            while self._pending:
                await self._gather()
                batch = self._take()
                if batch:
                    await self._run(batch)
        finally:  # the worker itself cancelled (the loop closing): no caller waits forever
            self._fail([*self._running, *self._pending], "the batch was cancelled")

    async def _gather(self) -> None:
        """Wait up to ``max_wait_s`` for the queue to fill a batch."""
        if len(self._pending) >= self.max_batch or self.max_wait_s <= 0:
            return
        self._wake = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait([self._wake], timeout=self.max_wait_s)
        finally:
            self._wake = None

    def _take(self) -> list[_Request]:
        """Up to ``max_batch`` queued requests of each version whose callers still wait, oldest
        first."""
        batch: list[_Request] = []
        rest: list[_Request] = []
        taken: dict[str, int] = {}
        for request in self._pending:
            if request.future.done():
                continue
            if taken.get(request.group, 0) < self.max_batch:
                taken[request.group] = taken.get(request.group, 0) + 1
                batch.append(request)
            else:
                rest.append(request)
        self._pending = rest
        return batch

    async def _run(self, batch: list[_Request]) -> None:
        """Generate each version's rows of ``batch`` in a worker thread of its own, at the same
        time, and answer every caller when all are done."""
        self._running = batch
        groups: dict[str, list[_Request]] = {}
        for request in batch:
            groups.setdefault(request.group, []).append(request)
        outcomes = await asyncio.gather(
            *(self._generate(requests) for requests in groups.values()), return_exceptions=True
        )
        self._running = []  # (left set when cancelled: _drain fails them)
        for (group, requests), outcome in zip(groups.items(), outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.warning("%s: a batch of %d failed: %s", group, len(requests), outcome)
                self._fail(requests, f"generation failed: {outcome}")
                continue
            self.batches += 1
            self.rows += len(requests)
            for request, gen in zip(requests, outcome, strict=True):
                if not request.future.done():
                    request.future.set_result(gen)

    @staticmethod
    async def _generate(requests: list[_Request]) -> list[Generation]:
        """One version's rows, generated in a worker thread."""
        gens = await asyncio.to_thread(
            requests[0].generate, [r.prompt for r in requests], [r.row for r in requests]
        )
        if len(gens) != len(requests):
            raise RuntimeError(f"{len(gens)} generations for {len(requests)} prompts")
        return gens

    def _fail(self, requests: list[_Request], reason: str) -> None:
        for request in requests:
            if not request.future.done():
                request.future.set_exception(UpstreamError(f"{request.group}: {reason}"))
