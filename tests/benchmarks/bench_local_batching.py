"""Requests per second of the in-process upstream, micro-batched vs one request at a time.

``--requests`` chat requests (demo questions, the demo agent's 16-token budget, a third of them
sampled with a seed as diverse siblings are) from ``--concurrency`` callers at once, through
``LocalUpstream.complete`` on the same model: batched with ``gateway.local_batch_size`` =
``--batch`` and, as the baseline in the same run, with batches of 1 (what the upstream did
before: one ``generate`` per request). Prints both rates and their ratio.

    python tests/benchmarks/bench_local_batching.py [--model DIR] [--requests 400]
        [--concurrency 16] [--batch 16]

Without ``--model``, an untrained demo-sized model is built in a temporary directory (the
speed of a forward pass does not depend on what the weights learned).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from infra.serving.local_lm import LocalLM  # noqa: E402
from infra.settings import GatewaySettings, Settings  # noqa: E402
from infra.store import LocalStore  # noqa: E402
from infra.upstream.completion import GenParams  # noqa: E402
from infra.upstream.local import LocalUpstream  # noqa: E402


def demo_model(where: Path) -> Path:
    """An untrained model of the embedded demo's shape (the bootstrap's default config)."""
    import torch

    from tasks.demo.pretrain import BootstrapConfig, build_model, build_tokenizer

    torch.manual_seed(0)
    cfg = BootstrapConfig()
    tok = build_tokenizer(cfg.n_positions)
    build_model(cfg, tok).save_pretrained(where)
    tok.save_pretrained(where)
    return where


def requests(n: int) -> list[tuple[list[dict[str, str]], GenParams]]:
    """Demo-shaped requests: greedy answers, every third one sampled with its own seed."""
    out = []
    for i in range(n):
        a, b = 10 + i % 90, 10 + (i * 7) % 90
        messages = [{"role": "user", "content": f"What is {a}+{b}?"}]
        params = GenParams(max_tokens=16)
        if i % 3 == 2:
            params = GenParams(max_tokens=16, temperature=0.9, seed=i)
        out.append((messages, params))
    return out


async def drive(upstream: LocalUpstream, n: int, concurrency: int) -> float:
    """Seconds to answer ``n`` requests from ``concurrency`` callers."""
    queue = requests(n)
    await upstream.complete(*queue[0])  # warm up (first call: lazy imports)

    async def caller(mine: list[tuple[list[dict[str, str]], GenParams]]) -> None:
        for messages, params in mine:
            await upstream.complete(messages, params)

    started = time.perf_counter()
    await asyncio.gather(*(caller(queue[i::concurrency]) for i in range(concurrency)))
    return time.perf_counter() - started


def rate(lm: LocalLM, home: Path, *, n: int, concurrency: int, batch: int) -> float:
    """Requests per second with batches of at most ``batch``."""
    settings = Settings(home=home, gateway=GatewaySettings(local_batch_size=batch))
    upstream = LocalUpstream("v0", store=LocalStore(home / "store"), settings=settings)
    upstream._load = lambda: lm  # type: ignore[method-assign]
    elapsed = asyncio.run(drive(upstream, n, concurrency))
    assert upstream.batcher is not None
    mean = upstream.batcher.rows / max(1, upstream.batcher.batches)
    print(
        f"  batch <= {batch:3d}: {n / elapsed:7.1f} req/s ({elapsed:.1f} s, mean batch {mean:.1f})"
    )
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or demo_model(Path(tmp) / "model")
        lm = LocalLM.load(path)
        print(f"{args.requests} requests, {args.concurrency} callers, model {path.name}")
        one = rate(lm, Path(tmp), n=args.requests, concurrency=args.concurrency, batch=1)
        many = rate(lm, Path(tmp), n=args.requests, concurrency=args.concurrency, batch=args.batch)
    print(f"batched / unbatched: {many / one:.1f}x")


if __name__ == "__main__":
    main()
