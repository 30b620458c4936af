"""Every arm of `flywheel prove` trains, answers the golden set and gets the gate's verdict,
in two worker processes, on a small shared traffic sample (a tiny untrained model: this
checks the machinery and the report, not the result; `make prove` measures the result)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from infra.settings import RewardSettings, Settings, get_settings
from tasks.demo import domain
from tasks.demo.pretrain import BootstrapConfig, build_model, build_tokenizer
from tasks.golden import load_golden
from tasks.prove.arms import ARMS, Baseline, golden_answers, golden_scores
from tasks.prove.report import text_table, write_report
from tasks.prove.run import Ablation, loop_vs_control, machine_load, summarize, train_arms
from tasks.prove.traffic import Traffic
from tasks.train.config import TrainConfig
from tasks.train.pairs import GoldenFilter, select

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def tiny_model(path: Path) -> Path:
    config = BootstrapConfig(n_layer=1, n_embd=16, n_head=2, n_positions=64)
    tok = build_tokenizer(config.n_positions)
    build_model(config, tok).save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def traffic(n: int) -> Traffic:
    """Prompt groups with one right and one wrong answer each, as stage 4 would select them."""
    rng = random.Random(0)
    rows = []
    for i in range(n):
        item = domain.sample_question(rng)
        wrong = str(int(item.reference) + 1)
        for j, (answer, reward) in enumerate(((item.reference, 0.9), (wrong, 0.1))):
            rows.append(
                {
                    "trace_id": f"t{i}-{j}",
                    "prompt_group": f"g{i}",
                    "user_key": "u",
                    "question": item.question,
                    "contexts": list(item.contexts),
                    "answer": answer,
                    "reward": reward,
                    "eligible_as": "train" if j == 0 else "rejected_only",
                    "window": "w",
                    "reward_config_hash": "rc",
                }
            )
    sel = select(
        rows, min_margin=0.2, contaminated=GoldenFilter.from_settings(get_settings().reward)
    )
    return Traffic(
        rows=rows, selection=sel, prompts=n, temperatures=[1.0], mean_reward=0.5, correct_share=0.5
    )


def test_every_arm_trains_scores_and_is_gated_in_worker_processes(tmp_path: Path) -> None:
    base = tiny_model(tmp_path / "v0")
    shared = traffic(24)
    golden = load_golden()
    _, texts = golden_answers(base, golden)
    scores = golden_scores(golden, texts, reward=RewardSettings())
    baseline = Baseline(model_dir=base, answers=texts, scores=scores)
    budget = TrainConfig(max_steps=2, batch_size=4, logging_steps=1, threads=1)
    done: list[str] = []
    runs = train_arms(
        [(arm, seed) for arm in ARMS for seed in (0, 1)],
        traffic=shared,
        budget=budget,
        baseline=baseline,
        settings=Settings(home=tmp_path / "home"),
        workers=2,
        on_done=lambda run, n, of: done.append(f"{run.arm}/{run.seed} {n}/{of}"),
    )
    assert sorted((r.arm, r.seed) for r in runs) == sorted((a, s) for a in ARMS for s in (0, 1))
    assert len(done) == 12 and done[-1].endswith("12/12")
    for r in runs:
        assert r.steps == 2 and len(r.scores) == len(golden)
        assert r.decision in ("PROCEED_TO_SHADOW", "MANUAL_REVIEW", "ROLLBACK")
        assert set(r.checks) == {"diversity", "length_bias", "kl"}
    items = {r.arm: r.train_items for r in runs}
    assert items["loop"] == items["shuffled"] == items["dpo_plain"] == 24
    assert items["rft"] == items["oracle_sft"] == items["grpo"] == 24
    ab = Ablation(
        base_version="v0",
        base_accuracy=baseline.accuracy,
        golden_items=len(texts),
        seeds=[0, 1],
        budget=budget.hyperparameters(),
        traffic={
            "prompts": 24,
            "temperatures": [1.0],
            "answers": 48,
            "mean_reward": 0.5,
            "correct_share": 0.5,
            "pairs": 24,
            "singles": 24,
            "prompt_groups": 24,
        },
        arms=summarize(runs, arms=list(ARMS), base_accuracy=baseline.accuracy, items=len(texts)),
        runs=runs,
        comparison=loop_vs_control(runs),
        workers=2,
        wall_s=1.0,
        load=machine_load(),
    )
    files = write_report(ab, tmp_path / "prove")
    assert all(f.is_file() for f in files.values())
    assert "oracle_sft" in text_table(ab) and "grpo" in files["report"].read_text()
