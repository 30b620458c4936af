"""Teacher vs distilled student, side by side in one run: golden accuracy and serving cost per
request, both measured through the gateway.

The teacher is the demo's v0 (bootstrapped, or taken from FLYWHEEL_BOOTSTRAP_CACHE_DIR); the
student, of the demo profile's student shape (``demo-small``), is distilled from it
(:func:`tasks.distil.trainer.distil_model`: SFT plus KL to the teacher's logits) on the
verified answers of non-golden questions (what the verifier lets through). Both are then
published and served in process behind the gateway, and every golden question is sent to each
by name (greedy, the same concurrency; teacher and student rounds alternate to cancel machine
drift). Accuracy is each answer's verifier verdict; cost is what the gateway metered
(``agent_compute_seconds_total``, ``agent_tokens_total``, ``agent_cost_requests_total``).
The ratio printed is the student's over the teacher's, measured in this run.

    python tests/benchmarks/bench_distil.py [--steps N] [--answers 1000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
HOME = Path(tempfile.mkdtemp(prefix="flywheel-bench-distil-"))
os.environ.setdefault("PREFECT_HOME", str(HOME / "prefect"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["FLYWHEEL_HOME"] = str(HOME / "home")
# naming a version that is not released (the student) takes the operator's token
ADMIN_TOKEN = os.environ.setdefault("FLYWHEEL_GATEWAY__ADMIN_TOKEN", secrets.token_hex(20))


def accepted_answers(teacher_dir: Path, n: int) -> list[dict[str, str]]:
    """``n`` verified answers of non-golden questions, rendered as the teacher is served."""
    from tasks.demo import domain
    from tasks.train.pairs import completion_text, prompt_renderer

    render = prompt_renderer(teacher_dir)
    separator = getattr(render, "separator", None)
    rng = random.Random(0)
    out = []
    for _ in range(n):
        item = domain.sample_question(rng)
        prompt = render(domain.to_golden(item).prompt())
        out.append(
            {
                "prompt": prompt,
                "completion": completion_text(prompt, item.reference, separator=separator),
            }
        )
    return out


def distil_student(teacher_dir: Path, args: argparse.Namespace) -> tuple[Path, int, int]:
    """The student's directory, and the student's and the teacher's parameter counts."""
    from dataclasses import replace

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from infra.settings import get_settings
    from infra.settings.distil import DEFAULT_STUDENTS
    from tasks.distil.trainer import DistilConfig, distil_model

    # the settings' training (FLYWHEEL_DISTIL__*), with the steps and threads asked for
    config = DistilConfig.from_settings(get_settings().distil, steps=args.steps)
    config = replace(config, threads=args.threads if args.threads is not None else config.threads)

    teacher = AutoModelForCausalLM.from_pretrained(str(teacher_dir))
    tok = AutoTokenizer.from_pretrained(str(teacher_dir))
    out = distil_model(
        teacher,
        tok,
        HOME / "student",
        examples=accepted_answers(teacher_dir, args.answers),
        profile=DEFAULT_STUDENTS["demo-small"],
        config=config,
    )
    print(
        f"distilled in {out.wall_s:.0f} s ({config.steps} steps), final loss "
        f"{out.metrics['loss']:.3f}"
    )
    return out.output_dir, out.student_parameters, out.teacher_parameters


async def ask_all(url: str, version: str, items: list[Any], concurrency: int) -> list[str]:
    """Each golden item's greedy answer from ``version`` through the gateway."""
    import httpx

    gate = asyncio.Semaphore(concurrency)
    root = url.rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    async def one(http: httpx.AsyncClient, item: Any) -> str:
        body = {"model": version, "messages": item.prompt(), "temperature": 0, "max_tokens": 8}
        async with gate:
            r = await http.post(f"{root}/v1/chat/completions", json=body)
        r.raise_for_status()
        return str(r.json()["choices"][0]["message"]["content"] or "")

    async with httpx.AsyncClient(timeout=120, headers=headers) as http:
        return await asyncio.gather(*(one(http, it) for it in items))


def main() -> int:
    """Distil, serve both, measure, print side by side."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--steps", type=int, default=None, help="student optimizer steps (FLYWHEEL_DISTIL__STEPS)"
    )
    p.add_argument("--answers", type=int, default=1000, help="accepted answers to learn from")
    p.add_argument("--rounds", type=int, default=2, help="golden passes per model")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--threads", type=int, default=None, help="torch threads while distilling")
    args = p.parse_args()

    from infra.gateway.serve import start_background_gateway
    from infra.metrics.cost_readers import EmbeddedCost
    from infra.metrics.promql_embedded import EmbeddedMetrics
    from infra.serving.models import publish_model_dir
    from infra.settings import get_settings
    from infra.store import open_store
    from tasks.demo.bootstrap import bootstrap_base_model
    from tasks.golden import settings_golden, verified_scores

    settings = get_settings()
    store = open_store(settings)
    started = time.perf_counter()
    boot = bootstrap_base_model(store, settings=settings)
    student_dir, n_student, n_teacher = distil_student(boot.model_dir, args)
    publish_model_dir(store, "v1", student_dir)
    golden = settings_golden(settings.reward, None, workloads=settings.workloads)
    handle = start_background_gateway(settings, host="127.0.0.1", port=0)
    assert handle.admin_url is not None  # the operator's listener: pinned versions, metrics
    meter = EmbeddedCost(EmbeddedMetrics.from_url(handle.admin_url, token=ADMIN_TOKEN).scrape)
    since = meter.mark()
    scores: dict[str, list[float]] = {"v0": [], "v1": []}
    try:
        for _ in range(args.rounds):
            for version in ("v0", "v1") if _ % 2 == 0 else ("v1", "v0"):
                answers = asyncio.run(ask_all(handle.admin_url, version, golden, args.concurrency))
                got = verified_scores(golden, answers, reward=settings.reward)
                scores[version] += [float(v or 0.0) for v in got]
        cost = {v: meter.read_cost(v, since=since) for v in ("v0", "v1")}
    finally:
        handle.stop()
    rows = []
    for version, name, params in (("v0", "teacher", n_teacher), ("v1", "student", n_student)):
        c = cost[version]
        per = c.compute_per_request_s or float("nan")
        tokens = (c.tokens_in + c.tokens_out) / max(1.0, c.requests)
        acc = sum(scores[version]) / max(1, len(scores[version]))
        rows.append((name, version, params, acc, per, tokens, c.requests))
    print(
        f"\n{'':8} {'version':8} {'parameters':>11} {'golden acc':>11} {'ms/request':>11} "
        f"{'tokens/req':>11} {'requests':>9}"
    )
    for name, version, params, acc, per, tokens, n in rows:
        print(
            f"{name:8} {version:8} {params:>11,} {acc:>11.1%} {1000 * per:>11.2f} "
            f"{tokens:>11.1f} {n:>9.0f}"
        )
    t, s = rows[0], rows[1]
    print(
        f"\nstudent / teacher: parameters {s[2] / t[2]:.2f}x, golden accuracy "
        f"{100 * (s[3] - t[3]):+.1f} points, compute per request {s[4] / t[4]:.2f}x "
        f"({t[4] / s[4]:.1f}x cheaper); {len(golden)} golden items x {args.rounds} rounds; "
        f"wall {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
