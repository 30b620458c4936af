"""Per-row parameters in one batch of the in-process model: each row gets what it asked for,
the same answer as when generated alone; and the in-process upstream batches its callers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from infra.serving.local_lm import LocalLM, RowParams
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from infra.upstream.completion import GenParams
from infra.upstream.local import LocalUpstream

PROMPTS = [f"Q: What is {a}+{b}?\nA:" for a, b in [(1, 2), (13, 58), (7, 700), (99, 1), (5, 5)]]


def _rows() -> list[RowParams]:
    return [
        RowParams(temperature=1.0, max_new_tokens=12, seed=1),
        RowParams(temperature=0.0, max_new_tokens=12),
        RowParams(temperature=0.7, top_p=0.9, max_new_tokens=3, seed=2),
        RowParams(temperature=1.3, max_new_tokens=7, seed=3),
        RowParams(temperature=0.0, max_new_tokens=1),
    ]


def test_a_seeded_row_is_the_same_alone_and_batched(tiny_lm: LocalLM) -> None:
    rows = _rows()
    batched = tiny_lm.generate_rows(PROMPTS, rows)
    alone = [tiny_lm.generate_rows([p], [r])[0] for p, r in zip(PROMPTS, rows, strict=True)]
    assert [g.text for g in batched] == [g.text for g in alone]
    for got, want in zip(batched, alone, strict=True):
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-4)
    reseeded = tiny_lm.generate_rows(PROMPTS[:1], [RowParams(1.0, max_new_tokens=12, seed=9)])
    assert reseeded[0].text != batched[0].text  # the seed is what decides


def test_each_row_keeps_its_own_token_budget(tiny_lm: LocalLM) -> None:
    gens = tiny_lm.generate_rows(PROMPTS, _rows())
    for gen, row in zip(gens, _rows(), strict=True):
        assert 1 <= gen.tokens_out <= row.max_new_tokens
        assert len(gen.logprobs) == gen.tokens_out
        if gen.tokens_out == row.max_new_tokens and gen.finish_reason == "length":
            continue
        assert gen.finish_reason == "stop"


def test_greedy_rows_match_the_plain_batch(tiny_lm: LocalLM) -> None:
    greedy = tiny_lm.generate_rows(PROMPTS, [RowParams(max_new_tokens=8)] * len(PROMPTS))
    plain = tiny_lm.generate_batch(PROMPTS, max_new_tokens=8)
    assert [g.text for g in greedy] == [g.text for g in plain]
    for got, want in zip(greedy, plain, strict=True):
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-5)


def test_rows_too_long_to_share_the_context_still_answer(tiny_lm: LocalLM) -> None:
    long = "Q: " + "1+" * 30 + "1?\nA:"  # fills the 48-token context on its own
    rows = [RowParams(max_new_tokens=4), RowParams(max_new_tokens=40)]
    gens = tiny_lm.generate_rows([long, PROMPTS[0]], rows)
    alone = [
        tiny_lm.generate_rows([p], [r])[0] for p, r in zip([long, PROMPTS[0]], rows, strict=True)
    ]
    assert [g.text for g in gens] == [g.text for g in alone]


def test_the_local_upstream_answers_concurrent_callers_in_batches(
    tiny_lm: LocalLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(LocalUpstream, "_load", lambda self: tiny_lm)
    settings = Settings(home=tmp_path, gateway=GatewaySettings(local_batch_size=8))
    upstream = LocalUpstream("v0", store=LocalStore(tmp_path / "store"), settings=settings)
    messages = [[{"role": "user", "content": p.split("\n")[0][3:]}] for p in PROMPTS]
    params = GenParams(temperature=0.9, max_tokens=6, seed=5)

    async def main() -> list[str]:
        await upstream._model()
        done = await asyncio.gather(*(upstream.complete(m, params) for m in messages * 2))
        return [c.text for c in done]

    texts = asyncio.run(main())
    assert upstream.batcher is not None and upstream.batcher.batches < len(texts)
    alone = [
        tiny_lm.generate_rows([tiny_lm.render(m)], [RowParams(0.9, 1.0, 6, 5)])[0].text
        for m in messages
    ]
    assert texts == alone * 2


def test_each_row_carries_its_share_of_the_batch_compute(tiny_lm: LocalLM) -> None:
    """What the gateway meters as a request's serving cost (infra.metrics.cost): the batch's
    compute, split evenly, and more of it for a batch that generates more tokens."""
    short = tiny_lm.generate_rows(PROMPTS, [RowParams(max_new_tokens=1)] * len(PROMPTS))
    long = tiny_lm.generate_rows(PROMPTS, [RowParams(max_new_tokens=40)] * len(PROMPTS))
    assert len({g.compute_s for g in long}) == 1
    assert all(g.compute_s is not None and g.compute_s > 0 for g in short + long)
    assert sum(g.compute_s or 0 for g in long) > sum(g.compute_s or 0 for g in short)
    # and the batch it shared (the cost rail compares versions at equal batch sizes)
    assert {g.batch_size for g in short + long} == {len(PROMPTS)}
    [alone] = tiny_lm.generate_rows(PROMPTS[:1], [RowParams(max_new_tokens=1)])
    assert alone.batch_size == 1


def test_a_client_asking_8192_tokens_of_the_in_process_model_gets_at_most_its_cap(
    tiny_lm: LocalLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-process model decodes on the gateway's CPU in batches shared with other users:
    one client's max_tokens=8192 (within the HTTP servers' limit) is held to the local cap."""
    monkeypatch.setattr(LocalUpstream, "_load", lambda self: tiny_lm)
    seen: list[int] = []
    real = tiny_lm.generate_rows

    def spy(prompts: list[str], rows: list[RowParams]) -> Any:
        seen.extend(r.max_new_tokens for r in rows)
        return real(prompts, rows)

    monkeypatch.setattr(tiny_lm, "generate_rows", spy)
    settings = Settings(home=tmp_path, gateway=GatewaySettings(local_max_tokens=5))
    upstream = LocalUpstream("v0", store=LocalStore(tmp_path / "store"), settings=settings)
    messages = [{"role": "user", "content": "What is 2+2?"}]

    async def main() -> int:
        done = await upstream.complete(messages, GenParams(temperature=0.0, max_tokens=8192))
        return done.tokens_out or 0

    assert asyncio.run(main()) <= 5 and seen == [5]
