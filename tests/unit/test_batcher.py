"""Micro-batching of in-process generations: batches form, failures and cancellations stay in
their own batch (a fake ``generate``; the real model's rows are in test_local_sampling)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from infra.errors import UpstreamError
from infra.serving.local_lm import Generation, RowParams
from infra.upstream.batcher import MicroBatcher


class FakeGenerate:
    """Records each batch; ``gate`` (when set) holds a batch until released; a prompt
    containing "boom" fails its whole batch."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.batches: list[list[str]] = []
        self.gate = gate
        self.started = threading.Event()

    def __call__(self, prompts: list[str], rows: list[RowParams]) -> list[Generation]:
        self.batches.append(list(prompts))
        self.started.set()
        if self.gate is not None:
            self.gate.wait(30)
        if any("boom" in p for p in prompts):
            raise RuntimeError("the forward pass blew up")
        return [
            Generation(text=p.upper(), tokens_in=1, tokens_out=r.max_new_tokens)
            for p, r in zip(prompts, rows, strict=True)
        ]


async def _when(event: threading.Event) -> None:
    await asyncio.to_thread(event.wait, 30)


def test_concurrent_requests_are_generated_in_one_batch() -> None:
    fake = FakeGenerate()
    batcher = MicroBatcher(fake, name="v0", max_batch=4, max_wait_s=30.0)

    async def main() -> list[Generation]:
        return await asyncio.gather(*(batcher.submit(f"q{i}", RowParams()) for i in range(4)))

    gens = asyncio.run(main())  # a full batch goes at once: no 30 s wait
    assert [g.text for g in gens] == ["Q0", "Q1", "Q2", "Q3"]  # each caller gets its own row
    assert fake.batches == [["q0", "q1", "q2", "q3"]]
    assert (batcher.batches, batcher.rows) == (1, 4)


def test_requests_arriving_during_a_batch_form_the_next_one() -> None:
    gate = threading.Event()
    fake = FakeGenerate(gate)
    batcher = MicroBatcher(fake, name="v0", max_batch=8, max_wait_s=0.0)

    async def main() -> list[Generation]:
        first = asyncio.ensure_future(batcher.submit("a", RowParams()))
        await _when(fake.started)
        rest = [asyncio.ensure_future(batcher.submit(p, RowParams())) for p in "bcd"]
        await asyncio.sleep(0)
        gate.set()
        return await asyncio.gather(first, *rest)

    assert [g.text for g in asyncio.run(main())] == ["A", "B", "C", "D"]
    assert fake.batches == [["a"], ["b", "c", "d"]]


def test_no_batch_is_larger_than_the_maximum() -> None:
    fake = FakeGenerate()
    batcher = MicroBatcher(fake, name="v0", max_batch=3, max_wait_s=0.0)

    async def main() -> list[Generation]:
        return await asyncio.gather(*(batcher.submit(str(i), RowParams()) for i in range(7)))

    assert len(asyncio.run(main())) == 7
    assert [len(b) for b in fake.batches] == [3, 3, 1]


def test_a_failed_batch_fails_its_requests_and_later_ones_still_work() -> None:
    fake = FakeGenerate()
    # the failing pair fills a batch at once; the lone "later" waits out the short max wait
    batcher = MicroBatcher(fake, name="v7", max_batch=2, max_wait_s=0.2)

    async def main() -> tuple[list[Any], Generation]:
        failed = await asyncio.gather(
            batcher.submit("boom", RowParams()),
            batcher.submit("innocent", RowParams()),
            return_exceptions=True,
        )
        return list(failed), await batcher.submit("later", RowParams(max_new_tokens=3))

    failed, later = asyncio.run(main())
    assert all(isinstance(e, UpstreamError) for e in failed)
    assert "v7: generation failed: the forward pass blew up" in str(failed[0])
    assert later.text == "LATER" and later.tokens_out == 3


def test_a_cancelled_caller_does_not_break_its_batch() -> None:
    gate = threading.Event()
    fake = FakeGenerate(gate)
    batcher = MicroBatcher(fake, name="v0", max_batch=8, max_wait_s=0.0)

    async def main() -> tuple[Generation, Generation]:
        gone = asyncio.ensure_future(batcher.submit("gone", RowParams()))
        kept = asyncio.ensure_future(batcher.submit("kept", RowParams()))
        await _when(fake.started)  # both are in the running batch
        gone.cancel()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await gone
        return await kept, await batcher.submit("next", RowParams())

    kept, after = asyncio.run(main())
    assert (kept.text, after.text) == ("KEPT", "NEXT")


def test_a_caller_cancelled_while_queued_is_left_out_of_the_batch() -> None:
    gate = threading.Event()
    fake = FakeGenerate(gate)
    batcher = MicroBatcher(fake, name="v0", max_batch=8, max_wait_s=0.0)

    async def main() -> list[Generation]:
        first = asyncio.ensure_future(batcher.submit("first", RowParams()))
        await _when(fake.started)
        queued = [asyncio.ensure_future(batcher.submit(p, RowParams())) for p in ("x", "y")]
        await asyncio.sleep(0)
        queued[0].cancel()
        gate.set()
        return [await first, await queued[1]]

    assert [g.text for g in asyncio.run(main())] == ["FIRST", "Y"]
    assert fake.batches == [["first"], ["y"]]


def test_each_event_loop_gets_its_own_worker() -> None:
    batcher = MicroBatcher(FakeGenerate(), name="v0", max_batch=2, max_wait_s=0.0)
    for prompt in ("one", "two"):
        assert asyncio.run(batcher.submit(prompt, RowParams())).text == prompt.upper()


def test_a_shared_batcher_answers_every_version_of_a_batch_together() -> None:
    """Two versions on one engine (a canary at 90 %: seven candidate requests, one stable):
    each version's rows go to its own model in one call, and stable's lone request waits for
    the candidate's seven, as in one vLLM engine step. With a queue per version it came back
    first, every time, and the candidate's answers read as a slower model."""
    gate = threading.Event()
    candidate, stable = FakeGenerate(gate), FakeGenerate()
    engine = MicroBatcher(name="in-process", max_batch=8, max_wait_s=0.05)

    async def main() -> tuple[list[Generation], Generation, bool]:
        cand = [
            asyncio.ensure_future(
                engine.submit(f"c{i}", RowParams(), generate=candidate, group="v2")
            )
            for i in range(7)
        ]
        lone = asyncio.ensure_future(engine.submit("s", RowParams(), generate=stable, group="v0"))
        await _when(candidate.started)
        await _when(stable.started)
        await asyncio.sleep(0.1)
        early = lone.done()  # stable's rows were generated long ago: is its caller answered?
        gate.set()
        return await asyncio.gather(*cand), await lone, early

    cand, lone, early = asyncio.run(main())
    assert not early
    assert [g.text for g in cand] == [f"C{i}" for i in range(7)] and lone.text == "S"
    assert candidate.batches == [[f"c{i}" for i in range(7)]] and stable.batches == [["s"]]
    assert (engine.batches, engine.rows) == (2, 8)


def test_one_versions_failure_on_a_shared_batcher_fails_only_its_requests() -> None:
    engine = MicroBatcher(name="in-process", max_batch=4, max_wait_s=0.05)
    broken, fine = FakeGenerate(), FakeGenerate()

    async def main() -> list[Any]:
        return await asyncio.gather(
            engine.submit("boom", RowParams(), generate=broken, group="v9"),
            engine.submit("ok", RowParams(), generate=fine, group="v0"),
            return_exceptions=True,
        )

    failed, answered = asyncio.run(main())
    assert isinstance(failed, UpstreamError) and str(failed).startswith("v9: generation failed")
    assert isinstance(answered, Generation) and answered.text == "OK"
