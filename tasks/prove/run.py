"""The ablation run: the shared traffic once, then every (arm, seed) trained and scored, in
parallel worker processes (one torch thread each: on a small model two single-threaded
trainings on two cores beat one two-threaded training), then the statistics."""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tasks.prove.arms import ARMS, CONTROL, LOOP, ArmRun, Baseline, run_arm
from tasks.prove.stats import Interval, PairedComparison, compare, seed_interval

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from infra.settings import Settings
    from tasks.prove.traffic import Traffic
    from tasks.train.config import TrainConfig

log = logging.getLogger(__name__)
# the costliest first, so the last job to finish is a short one
COST_ORDER = ("grpo", "loop", "shuffled", "dpo_plain", "rft", "oracle_sft")


@dataclass(kw_only=True)
class ArmSummary:
    """One arm over its seeds: interval, accuracies, decisions, whether it regressed."""

    arm: str
    label: str
    interval: Interval
    accuracies: list[float]
    decisions: list[str]
    train_items: int
    mean_train_s: float
    mean_answer_chars: float
    regressed: bool  # mean golden accuracy below the base model's


@dataclass(kw_only=True)
class Ablation:
    """The whole ablation: base model, budget, traffic, arms, runs and the comparison."""

    base_version: str
    base_accuracy: float
    golden_items: int
    seeds: list[int]
    budget: dict[str, Any]
    traffic: dict[str, Any]
    arms: list[ArmSummary]
    runs: list[ArmRun]
    comparison: PairedComparison
    workers: int
    wall_s: float
    phases_s: dict[str, float] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=dict)


def traffic_summary(traffic: Traffic) -> dict[str, Any]:
    """The shared traffic's counts (no text)."""
    sel = traffic.selection
    return {
        "prompts": traffic.prompts,
        "temperatures": traffic.temperatures,
        "answers": len(traffic.rows),
        "mean_reward": round(traffic.mean_reward, 4),
        "correct_share": round(traffic.correct_share, 4),
        "pairs": len(sel.pairs),
        "singles": len(sel.sft),
        "prompt_groups": len(sel.prompts),
        "counts": {**traffic.counts, **sel.counts},
    }


def train_arms(
    jobs: Sequence[tuple[str, int]],
    *,
    traffic: Traffic,
    budget: TrainConfig,
    baseline: Baseline,
    settings: Settings,
    workers: int,
    on_done: Callable[[ArmRun, int, int], None] | None = None,
) -> list[ArmRun]:
    """Every (arm, seed) of ``jobs``, ``workers`` at a time in spawned processes (in this
    process when ``workers`` is 1)."""
    order = sorted(jobs, key=lambda j: (COST_ORDER.index(j[0]), j[1]))
    kwargs: dict[str, Any] = {
        "selection": traffic.selection,
        "budget": budget,
        "baseline": baseline,
        "settings": settings,
    }
    runs: list[ArmRun] = []
    if workers <= 1:
        for arm, seed in order:
            runs.append(run_arm(arm, seed=seed, **kwargs))
            if on_done:
                on_done(runs[-1], len(runs), len(order))
        return runs
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [pool.submit(run_arm, arm, seed=seed, **kwargs) for arm, seed in order]
        for fut in as_completed(futures):
            runs.append(fut.result())
            if on_done:
                on_done(runs[-1], len(runs), len(order))
    return runs


def summarize(
    runs: Sequence[ArmRun], *, arms: Sequence[str], base_accuracy: float, items: int
) -> list[ArmSummary]:
    """One summary per arm, in ``arms`` order."""
    out = []
    for name in arms:
        mine = sorted((r for r in runs if r.arm == name), key=lambda r: r.seed)
        if not mine:
            continue
        accs = [r.accuracy for r in mine]
        interval = seed_interval(accs, items=items)
        out.append(
            ArmSummary(
                arm=name,
                label=ARMS[name].label,
                interval=interval,
                accuracies=accs,
                decisions=[r.decision for r in mine],
                train_items=mine[0].train_items,
                mean_train_s=sum(r.train_s for r in mine) / len(mine),
                mean_answer_chars=sum(r.mean_answer_chars for r in mine) / len(mine),
                regressed=interval.mean < base_accuracy,
            )
        )
    return out


def loop_vs_control(runs: Sequence[ArmRun]) -> PairedComparison:
    """The paired comparison of the loop against the shuffled control."""
    loop = [r.scores for r in sorted(runs, key=lambda r: r.seed) if r.arm == LOOP]
    ctrl = [r.scores for r in sorted(runs, key=lambda r: r.seed) if r.arm == CONTROL]
    return compare(LOOP, CONTROL, a_runs=loop, b_runs=ctrl)


def machine_load() -> dict[str, Any]:
    """CPU count and load averages (1, 5, 15 min) when the run ends: how shared the machine was."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return {"cpus": os.cpu_count()}
    return {"cpus": os.cpu_count(), "loadavg": [round(one, 2), round(five, 2), round(fifteen, 2)]}


def timed(phases: dict[str, float], name: str, started: float) -> float:
    """Record the seconds since ``since`` as ``phases[name]``; returns now."""
    now = time.perf_counter()
    phases[name] = round(now - started, 1)
    return now
