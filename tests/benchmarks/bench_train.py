"""Training overhead: time per DPO step through the train flow's training task (Prefect task,
progress-artifact callback, lineage bookkeeping) vs a bare TRL script, same pairs, same model.

Both run ``DPOTrainer`` with the same config; the per-step time is the trainer's own
``train_runtime / steps`` (reference log-probs precomputed inside it in both cases), and the
end-to-end wall time of each call is printed too. Rounds alternate bare / flow to cancel machine
drift. Goal (issue 7): ratio <= 1.10.

    python tests/benchmarks/bench_train.py [--steps 60] [--rounds 2] [--pairs 400]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
HOME = Path(tempfile.mkdtemp(prefix="flywheel-bench-train-"))
os.environ.setdefault("PREFECT_HOME", str(HOME / "prefect"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def base_model(args: argparse.Namespace) -> Path:
    """A demo base model (bootstrapped once, cached in the bench home)."""
    from infra.settings import Settings
    from infra.store import LocalStore
    from tasks.demo.bootstrap import bootstrap_base_model
    from tasks.demo.pretrain import BootstrapConfig

    settings = Settings(home=HOME)
    cfg = BootstrapConfig(n_layer=2, n_embd=64, n_head=2, n_positions=64, steps=args.base_steps)
    return bootstrap_base_model(
        LocalStore(settings.resolved_store_url), settings=settings, config=cfg
    ).model_dir


def pairs(n: int) -> list[dict[str, Any]]:
    """Preference pairs as the flow builds them (tasks.train.pairs.select on curated-like rows)."""
    from infra.settings import get_settings
    from tasks.demo import domain
    from tasks.train.pairs import GoldenFilter, select

    rng = random.Random(0)
    rows = []
    for i in range(n):
        item = domain.sample_question(rng)
        wrong = str(int(item.reference) + rng.choice([-10, -1, 1, 10]))
        for j, (answer, reward) in enumerate(((item.reference, 0.9), (wrong, 0.1))):
            rows.append(
                {
                    "trace_id": f"t{i}-{j}",
                    "prompt_group": f"g{i}",
                    "user_key": "u",
                    "question": item.question,
                    "contexts": item.contexts,
                    "answer": answer,
                    "reward": reward,
                    "eligible_as": "train" if j == 0 else "rejected_only",
                    "window": "w",
                    "reward_config_hash": "rc",
                }
            )
    return select(
        rows, min_margin=0.2, contaminated=GoldenFilter.from_settings(get_settings().reward)
    ).pairs


def bare_trl(base: Path, data: list[dict[str, Any]], steps: int) -> tuple[float, float]:
    """The reference: the shortest TRL script that trains the same thing."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
    from trl import DPOConfig, DPOTrainer

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    rows = [{k: p[k] for k in ("prompt", "chosen", "rejected")} for p in data]
    with tempfile.TemporaryDirectory() as work:
        args = DPOConfig(
            output_dir=work,
            learning_rate=5e-5,
            max_steps=steps,
            per_device_train_batch_size=16,
            logging_steps=10,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            bf16=False,
            gradient_checkpointing=False,
            beta=0.1,
            loss_type=["sigmoid", "sft"],
            loss_weights=[1.0, 1.0],
            precompute_ref_log_probs=True,
            max_length=256,
        )
        trainer = DPOTrainer(
            model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok
        )
        trainer.remove_callback(PrinterCallback)  # as the flow does: no stdout per log line
        out = trainer.train()
        model.save_pretrained(Path(work) / "model")
        tok.save_pretrained(Path(work) / "model")
    return out.metrics["train_runtime"] / steps, time.perf_counter() - t0


def through_flow(base: Path, data: list[dict[str, Any]], steps: int) -> tuple[float, float]:
    """The flow's path: train_task inside a flow run, with the progress-artifact callback."""
    from prefect import flow

    from tasks.train.config import TrainConfig
    from tasks.train.run import progress_artifact_callback
    from tasks.train.trainer import train_task

    @flow(name="bench-train")
    def run() -> Any:
        config = TrainConfig(method="dpo", max_steps=steps)
        with tempfile.TemporaryDirectory() as work:
            return train_task(
                base,
                Path(work) / "model",
                config=config,
                data={"pairs": data, "sft": [], "prompts": []},
                callbacks=[progress_artifact_callback(config)],
            )

    t0 = time.perf_counter()
    outcome = run()
    return outcome.metrics["seconds_per_step"], time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--base-steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (both paths)")
    args = parser.parse_args()
    import torch
    from prefect.testing.utilities import prefect_test_harness

    torch.set_num_threads(args.threads)
    base = base_model(args)
    data = pairs(args.pairs)
    bare: list[tuple[float, float]] = []
    flowed: list[tuple[float, float]] = []
    with prefect_test_harness(server_startup_timeout=180):
        through_flow(base, data, 2)  # warm-up: imports, first flow run
        for _ in range(args.rounds):
            bare.append(bare_trl(base, data, args.steps))
            flowed.append(through_flow(base, data, args.steps))
    b = statistics.median(s for s, _ in bare)
    f = statistics.median(s for s, _ in flowed)
    bw = statistics.median(w for _, w in bare)
    fw = statistics.median(w for _, w in flowed)
    print(f"pairs {len(data)}, {args.steps} steps of 16, {args.rounds} rounds (median)")
    print(f"bare TRL      : {1000 * b:8.1f} ms/step   call wall {bw:6.1f} s")
    print(f"through flow  : {1000 * f:8.1f} ms/step   call wall {fw:6.1f} s")
    print(f"ratio per step: {f / b:.3f}  (goal <= 1.10)   ratio wall: {fw / bw:.3f}")


if __name__ == "__main__":
    main()
