"""Judge throughput vs the ideal, and the cost of the non-LLM reward per trace.

1. LLM judge: N traces against a loopback OpenAI-compatible judge answering after ``--delay``
   seconds, ``--concurrency`` requests in flight. Ideal = N x delay / concurrency (every slot
   always busy, zero overhead); printed as a ratio (issue 5 goal: <= 1.25). The server runs
   in its own process (as a real judge would) and, as in the integration test, in a thread
   of this process. Baseline in the same run: a plain ``httpx.AsyncClient`` with one shared
   pool under an ``asyncio.Semaphore`` (the obvious implementation).
2. Verifier judge + non-LLM faithfulness/recall: microseconds per trace for distinct
   contents, and for a rerun served from the cache.

    python tests/benchmarks/bench_judge.py [--traces 320] [--concurrency 16] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from infra.llm import ChatClient  # noqa: E402
from infra.settings import JudgeSettings, Settings  # noqa: E402
from tasks.reward import ComponentCache, ScoreItem, Scorer  # noqa: E402
from tests.fakes.judge_server import FakeJudgeServer  # noqa: E402


def items(n: int, offset: int = 0) -> list[ScoreItem]:
    out = []
    for i in range(offset, offset + n):
        a, b = 10 + i % 90, 10 + (i // 90) % 90
        ctx = [f"calculator: {a} + {b} = {a + b}"]
        out.append(
            ScoreItem(
                question=f"What is {a}+{b}?", contexts=ctx, answer=str(a + b + i % 2), latency_s=1.0
            )
        )
    return out


def run_scorer(url: str, n: int, concurrency: int) -> tuple[float, float]:
    settings = Settings(judge=JudgeSettings(kind="llm", base_url=url, concurrency=concurrency))
    Scorer(settings, ragas_mode="non_llm").score(items(concurrency, offset=10_000))  # warm up
    scorer = Scorer(settings, ragas_mode="non_llm", client=ChatClient.from_settings(settings.judge))
    started, cpu = time.perf_counter(), time.process_time()
    scorer.score(items(n))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert scorer.stats.llm_requests == n and scorer.stats.judge_failures == 0
    return elapsed, cpu


def run_baseline(url: str, n: int, concurrency: int) -> tuple[float, float]:
    body = {"model": "judge", "messages": [{"role": "user", "content": ""}]}

    async def main() -> tuple[float, float]:
        sem = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(
            base_url=url, limits=httpx.Limits(max_connections=concurrency)
        ) as http:

            async def one(item: ScoreItem) -> None:
                case = {"question": item.question, "context": item.contexts, "answer": item.answer}
                payload = {**body, "messages": [{"role": "user", "content": json.dumps(case)}]}
                async with sem:
                    (await http.post("/chat/completions", json=payload)).raise_for_status()

            await asyncio.gather(*(one(i) for i in items(concurrency, offset=10_000)))
            started, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(one(i) for i in items(n)))
            return time.perf_counter() - started, time.process_time() - cpu

    return asyncio.run(main())


def server_process(delay: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.judge_server", "--delay", str(delay)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def bench_llm(n: int, concurrency: int, delay: float) -> None:
    ideal = n * delay / concurrency
    print(f"LLM judge: {n} traces, concurrency {concurrency}, {delay * 1000:.0f} ms per call")
    print(f"  ideal (concurrency / latency)      {ideal:6.2f} s")
    proc, url = server_process(delay)
    try:
        for name, fn in (
            ("flywheel ChatClient", run_scorer),
            ("baseline shared pool", run_baseline),
        ):
            t, cpu = fn(url, n, concurrency)
            print(
                f"  {name:<22} server process {t:6.2f} s  ratio vs ideal {t / ideal:.3f}"
                f"  client CPU {cpu / n * 1000:.2f} ms/call"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    with FakeJudgeServer(delay_s=delay) as server:
        t, _cpu = run_scorer(server.base_url, n, concurrency)
    print(
        f"  {'flywheel ChatClient':<22} server thread  {t:6.2f} s  ratio vs ideal {t / ideal:.3f}"
    )


def bench_non_llm(n: int) -> None:
    settings = Settings()
    batch = items(n)
    scorer, cache = Scorer(settings), ComponentCache()
    started = time.perf_counter()
    scorer.score(batch, cache)
    cold = (time.perf_counter() - started) / n * 1e6
    rerun = Scorer(settings)
    started = time.perf_counter()
    rerun.score(batch, cache)
    warm = (time.perf_counter() - started) / n * 1e6
    assert rerun.stats.judge_calls == 0
    print(f"verifier + non-LLM ragas: {n} distinct traces")
    print(
        f"  computed {cold:7.1f} us/trace   cached rerun {warm:7.1f} us/trace  ({cold / warm:.1f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=320)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.2)
    args = parser.parse_args()
    bench_llm(args.traces, args.concurrency, args.delay)
    bench_non_llm(8100)


if __name__ == "__main__":
    main()
