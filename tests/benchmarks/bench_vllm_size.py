"""How much cheaper a student a quarter of its teacher's size is on vLLM (CPU build), at three
model scales: what the distillation's "cheaper" can show with vLLM on this machine.

For each scale a teacher and a student of a quarter of its parameters are built with the Llama
profile's tokenizer and architecture (untrained: cost does not depend on the weights), each
served by a vLLM of its own, both up at once. Every answer is 16 tokens (``ignore_eos``) after
the same agent prompt; rounds alternate between the two servers so that the machine's drift
falls on both. Printed per scale: milliseconds per request one at a time and with 8 in flight
(the server's time per request: the round's wall time over its requests), and the student's
ratio to its teacher measured in this run.

Measured on the 2-core CPU machine, 2026-11-29 (beside a test run), student over teacher:

    scale   teacher  student   one at a time   8 at once
    demo     0.4M     0.1M         0.74x         0.90x
    11M     10.7M     2.7M         0.81x         0.69x
    84M     84.3M    21.2M         0.66x         0.54x

vLLM's per-step overhead (~15 ms a token here) is most of a small model's cost, so a quarter of
the parameters is far from a quarter of the time: a student is "2x cheaper" on vLLM only where
decoding dominates, on models far larger than this machine can pre-train in a test run (see
docs/stages/distil.md).

    python tests/benchmarks/bench_vllm_size.py [--rounds 3] [--requests 16]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# (name, teacher (layers, width, heads), student): heads of width 64, what vLLM's CPU kernels take
SCALES = [
    ("demo", (2, 128, 2), (2, 64, 1)),
    ("11M", (4, 512, 8), (4, 256, 4)),
    ("84M", (8, 1024, 16), (8, 512, 8)),
]
PROMPT = [
    {"role": "system", "content": "You are a calculator agent. Answer with the number."},
    {"role": "user", "content": "What is 23 + 58, then times 3, minus 7?"},
]


def build(path: Path, shape: tuple[int, int, int], tokenizer: object) -> int:
    from tasks.demo.llama_profile import build_model

    layers, width, heads = shape
    model = build_model(
        n_layer=layers, n_embd=width, n_head=heads, n_positions=2048, tokenizer=tokenizer
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)  # type: ignore[attr-defined]
    return sum(p.numel() for p in model.parameters())


def per_request_ms(url: str, n: int, in_flight: int) -> float:
    body = {
        "model": "m",
        "messages": PROMPT,
        "max_tokens": 16,
        "ignore_eos": True,
        "temperature": 0,
    }

    def ask(_: int) -> None:
        resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
        resp.raise_for_status()

    start = time.perf_counter()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(ask, range(n)))
    return (time.perf_counter() - start) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=16, help="per version, round and mode")
    args = parser.parse_args()
    from infra.serving.vllm_process import Engine, local_vllm
    from tasks.demo.llama_profile import build_tokenizer

    tok = build_tokenizer(2048)
    work = Path(tempfile.mkdtemp(prefix="flywheel-bench-vllm-size-"))
    print(
        f"{'scale':>6} {'teacher':>12} {'student':>12} {'mode':>10} {'teacher ms':>11} {'student ms':>11} {'ratio':>6}"
    )
    for name, teacher_shape, student_shape in SCALES:
        params = {}
        for role, shape in (("teacher", teacher_shape), ("student", student_shape)):
            params[role] = build(work / name / role, shape, tok)
        with contextlib.ExitStack() as stack:
            urls = {
                role: stack.enter_context(
                    local_vllm(
                        work / name / role,
                        served_name="m",
                        engine=Engine(max_model_len=2048),
                        log_path=work / name / f"{role}.log",
                    )
                )
                for role in ("teacher", "student")
            }
            for role in urls:  # warm-up
                per_request_ms(urls[role], 4, 1)
            for mode, in_flight in (("one", 1), ("8 at once", 8)):
                ms = {"teacher": 0.0, "student": 0.0}
                for r in range(args.rounds):
                    order = ("teacher", "student") if r % 2 == 0 else ("student", "teacher")
                    for role in order:
                        ms[role] += (
                            per_request_ms(urls[role], args.requests, in_flight) / args.rounds
                        )
                print(
                    f"{name:>6} {params['teacher'] / 1e6:>10.1f}M {params['student'] / 1e6:>10.1f}M "
                    f"{mode:>10} {ms['teacher']:>11.1f} {ms['student']:>11.1f} "
                    f"{ms['student'] / ms['teacher']:>5.2f}x",
                    flush=True,
                )


if __name__ == "__main__":
    main()
