"""Capacity of one vLLM (CPU build, ``.venv-vllm``) serving many LoRA adapters on one base: how
long loading an adapter takes, how much memory each one adds, and requests per second with 1
and N adapters active, each against a baseline measured in the same run.

The base is the Llama profile's architecture (``tasks/demo/llama_profile.py``: hidden 128, two
64-wide heads) with untrained weights, and the adapters are random rank-16 LoRA adapters on its
attention projections, the shape the release loads (trained weights cost the server the same).
vLLM is started with ``--max-loras N`` (every adapter fits in a batch). Requests go to vLLM
directly, ``--concurrency`` at a time, each generating exactly ``--tokens`` tokens
(``ignore_eos``), spread round-robin over the active adapters:

- load time: ``POST /v1/load_lora_adapter`` per adapter, vs one request to the base model;
- memory: RSS of vLLM's processes (API server and engine core) after the N loads minus before,
  per adapter, vs the RSS before; and what the ``--max-loras`` slots themselves cost (vLLM
  allocates them at startup): RSS of a server started with ``--max-loras N`` minus one with 1,
  per slot;
- throughput: req/s with 1 and with N adapters active vs the base model alone (rounds alternate
  base / 1 / N to cancel machine drift).

    python tests/benchmarks/bench_vllm_adapters.py [--adapters 7] [--requests 48] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
WORK = Path(tempfile.mkdtemp(prefix="flywheel-bench-vllm-"))
PROMPT = [{"role": "user", "content": "What is 23 + 58?"}]


def build_base(path: Path) -> Path:
    """The Llama profile's tokenizer and architecture, untrained, saved at ``path``."""
    from tasks.demo.llama_profile import fresh
    from tasks.demo.pretrain import BootstrapConfig

    tok, model = fresh(BootstrapConfig.for_profile("llama"), seed=0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_adapters(base: Path, n: int) -> list[Path]:
    """``n`` random rank-16 LoRA adapters on ``base``'s attention projections."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from tasks.demo.llama_profile import LORA_TARGETS

    paths = []
    for i in range(n):
        torch.manual_seed(i)
        model = AutoModelForCausalLM.from_pretrained(base)
        cfg = LoraConfig(r=16, lora_alpha=32, target_modules=LORA_TARGETS, init_lora_weights=False)
        peft_model = get_peft_model(model, cfg)
        path = WORK / f"adapter-{i}"
        peft_model.save_pretrained(path)
        paths.append(path)
    return paths


def server_rss(port: int) -> int:
    """Bytes of RSS of the vLLM process listening on ``port`` and all its descendants."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "--port" in cmd and cmd[cmd.index("--port") + 1] == str(port):
            tree = [proc, *proc.children(recursive=True)]
            return sum(p.memory_info().rss for p in tree if p.is_running())
    raise RuntimeError(f"no vLLM process on port {port}")


def ask(url: str, model: str, tokens: int) -> float:
    """One chat completion of exactly ``tokens`` tokens from ``model``; its seconds."""
    import httpx

    body = {
        "model": model,
        "messages": PROMPT,
        "max_tokens": tokens,
        "min_tokens": tokens,
        "ignore_eos": True,
        "temperature": 0,
    }
    started = time.perf_counter()
    resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300)
    resp.raise_for_status()
    return time.perf_counter() - started


def throughput(url: str, models: list[str], args: argparse.Namespace) -> float:
    """Requests per second, ``args.requests`` requests round-robin over ``models``."""
    started = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        names = [models[i % len(models)] for i in range(args.requests)]
        list(pool.map(lambda m: ask(url, m, args.tokens), names))
    return args.requests / (time.perf_counter() - started)


def measure(url: str, port: int, adapters: list[Path], args: argparse.Namespace) -> dict[str, Any]:
    """Load times, RSS before/after, and req/s per configuration over ``args.rounds`` rounds."""
    from infra.serving.model_server import VLLMServer

    server = VLLMServer([url], max_loras=len(adapters))
    for _ in range(3):  # warm-up: the first requests compile and allocate
        ask(url, "v0", args.tokens)
    base_s = statistics.median(ask(url, "v0", args.tokens) for _ in range(5))
    rss_before = server_rss(port)
    loads = []
    for i, path in enumerate(adapters):
        started = time.perf_counter()
        server.load(f"a{i}", str(path))
        loads.append(time.perf_counter() - started)
    time.sleep(2)  # let the engine settle before reading memory
    rss_after = server_rss(port)
    names = [f"a{i}" for i in range(len(adapters))]
    for name in names:
        ask(url, name, args.tokens)  # warm every adapter once
    rates: dict[str, list[float]] = {"base": [], "1": [], "N": []}
    for _ in range(args.rounds):
        rates["base"].append(throughput(url, ["v0"], args))
        rates["1"].append(throughput(url, names[:1], args))
        rates["N"].append(throughput(url, names, args))
    return {
        "base_s": base_s,
        "loads": loads,
        "rss_before": rss_before,
        "rss_after": rss_after,
        "rates": rates,
    }


def report(out: dict[str, Any], args: argparse.Namespace) -> None:
    """Print each measurement and its ratio against the baseline."""
    mib = 1024 * 1024
    slot = (out["rss_before"] - out["rss_one_slot"]) / max(1, args.adapters - 1)
    print(
        f"slots: RSS at startup {out['rss_one_slot'] / mib:.0f} MiB with --max-loras 1, "
        f"{out['rss_before'] / mib:.0f} MiB with {args.adapters}: {slot / mib:.1f} MiB per slot; "
        f"an adapter file is {out['adapter_bytes'] / 1024:.0f} KiB"
    )
    load_ms = statistics.median(out["loads"]) * 1000
    per_adapter = (out["rss_after"] - out["rss_before"]) / args.adapters
    print(f"one base request ({args.tokens} tokens): {out['base_s'] * 1000:.0f} ms")
    print(
        f"adapter load: median {load_ms:.0f} ms, max {max(out['loads']) * 1000:.0f} ms "
        f"over {args.adapters} loads = {load_ms / (out['base_s'] * 1000):.2f}x one base request"
    )
    print(
        f"memory: RSS {out['rss_before'] / mib:.0f} MiB -> {out['rss_after'] / mib:.0f} MiB, "
        f"{per_adapter / mib:.2f} MiB per adapter = "
        f"{per_adapter / out['rss_before'] * 100:.2f} % of the server's RSS"
    )
    base = statistics.median(out["rates"]["base"])
    for key, label in (("1", "1 adapter"), ("N", f"{args.adapters} adapters")):
        rate = statistics.median(out["rates"][key])
        rounds = ", ".join(f"{r:.2f}" for r in out["rates"][key])
        print(f"req/s with {label} active: {rate:.2f} ({rounds}) = {rate / base:.2f}x base")
    rounds = ", ".join(f"{r:.2f}" for r in out["rates"]["base"])
    print(f"req/s base model alone: {base:.2f} ({rounds}); concurrency {args.concurrency}")


def main() -> None:
    """Build the base and the adapters, start vLLM, measure, print."""
    from infra.serving.vllm_process import Engine, local_vllm

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapters", type=int, default=7)  # two workloads' default max_loras
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    base = build_base(WORK / "base")
    adapters = build_adapters(base, args.adapters)
    with local_vllm(
        base, served_name="v0", engine=Engine(max_loras=1), log_path=WORK / "vllm-1.log"
    ) as url:
        for _ in range(8):  # as many requests as the main server has had when measured
            ask(url, "v0", args.tokens)
        rss_one_slot = server_rss(int(url.rsplit(":", 1)[1]))
    with local_vllm(
        base,
        served_name="v0",
        engine=Engine(max_loras=args.adapters),
        log_path=WORK / "vllm.log",
    ) as url:
        out = measure(url, int(url.rsplit(":", 1)[1]), adapters, args)
    out["rss_one_slot"] = rss_one_slot
    out["adapter_bytes"] = (adapters[0] / "adapter_model.safetensors").stat().st_size
    report(out, args)


if __name__ == "__main__":
    main()
