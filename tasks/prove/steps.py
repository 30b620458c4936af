"""The steps of the ``prove`` flow (:mod:`flows.prove`): its options (the run form), the shared
traffic and the base model's golden answers as Prefect tasks, the arms trained with one budget
(their progress as they finish), the :class:`~tasks.prove.run.Ablation` it returns and the
report it publishes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, Field

from infra.errors import InsufficientTraffic
from infra.progress import report_progress
from infra.runtime import Runtime
from tasks.golden import settings_golden
from tasks.prove.arms import ARMS, CONTROL, LOOP, ArmRun, Baseline, golden_answers, golden_scores
from tasks.prove.report import markdown, text_table, write_report
from tasks.prove.run import (
    Ablation,
    loop_vs_control,
    machine_load,
    summarize,
    traffic_summary,
    train_arms,
)
from tasks.prove.sources import sample_questions
from tasks.prove.traffic import Traffic, build_traffic
from tasks.train.config import TrainConfig

if TYPE_CHECKING:
    from infra.settings import Settings, TrainSettings

JOB = "prove"  # the progress bar's job


class ProveOptions(BaseModel):
    """Budget of flywheel prove: by default 600 prompts at 4 temperatures, 200 steps of 16
    per arm, over 3 seeds."""

    seeds: int = Field(default=3, ge=1, le=10, description="training seeds per arm")
    steps: int = Field(default=200, ge=1, description="optimizer steps per arm and seed")
    batch_size: int = Field(default=16, ge=1, description="examples per optimizer step")
    prompts: int = Field(default=600, ge=20, description="prompts of the shared traffic")
    temperatures: list[float] = Field(
        default=[0.7, 0.9, 1.1, 1.3], description="sampling temperatures, one answer each"
    )
    arms: list[str] = Field(
        default=list(ARMS), description="arms to train (loop and shuffled required)"
    )
    workers: int = Field(default=2, ge=1, le=16, description="trainings at once (processes)")
    seed: int = Field(default=0, description="seed of the base model and the traffic")
    base: str | None = Field(
        default=None,
        pattern=r"^v\d+$",
        description="model version in the store to start from (default: the demo's v0)",
    )
    out: str | None = Field(
        default=None, description="report folder (default $FLYWHEEL_HOME/prove)"
    )


def require_arms(arms: Sequence[str]) -> None:
    """Nothing when ``arms`` are known arms and include the loop and its shuffled control.

    Raises:
        ValueError: an unknown arm, or the loop or the control missing.
    """
    unknown = sorted(set(arms) - set(ARMS))
    if unknown or not {LOOP, CONTROL} <= set(arms):
        raise ValueError(f"arms must be among {list(ARMS)} and include {LOOP} and {CONTROL}")


@task(cache_policy=NO_CACHE)
def traffic_task(model_dir: Path, opts: ProveOptions) -> Traffic:
    """Returns the shared traffic: sampled once from the base model, scored, selected."""
    from infra.serving.local_lm import LocalLM

    rt = Runtime.from_env()
    lm = LocalLM.load(model_dir)
    questions = sample_questions(rt.settings.reward, opts.prompts, seed=opts.seed)
    return build_traffic(
        lm, questions, settings=rt.settings, temperatures=opts.temperatures, seed=opts.seed
    )


@task(cache_policy=NO_CACHE)
def baseline_task(model_dir: Path) -> Baseline:
    """Returns the base model's golden answers and verifier scores."""
    reward = Runtime.from_env().settings.reward
    golden = settings_golden(reward)
    _, texts = golden_answers(model_dir, golden)
    return Baseline(
        model_dir=model_dir, answers=texts, scores=golden_scores(golden, texts, reward=reward)
    )


def require_traffic(traffic: Traffic, baseline: Baseline, *, need: int) -> None:
    """Nothing when the shared traffic gave at least ``need`` preference pairs and as many good
    answers (then its size is logged).

    Raises:
        InsufficientTraffic: it gave fewer (the message says what to change).
    """
    sel = traffic.selection
    if len(sel.pairs) < need or len(sel.sft) < need:
        raise InsufficientTraffic(
            f"the shared traffic gave {len(sel.pairs)} preference pairs and {len(sel.sft)} good "
            f"answers (< FLYWHEEL_TRAIN__MIN_PAIRS {need}): send more prompts (--prompts) or "
            f"start from a base model that is right more often (--base) ({baseline.accuracy:.1%} golden)"
        )
    get_run_logger().info(
        "traffic: %d pairs, %d singles, %d prompts", len(sel.pairs), len(sel.sft), len(sel.prompts)
    )


def arm_budget(opts: ProveOptions, train: TrainSettings) -> TrainConfig:
    """Every arm's training budget: the options' steps and batch size, the settings' learning
    rate and beta, one torch thread per training."""
    return TrainConfig(
        max_steps=opts.steps,
        batch_size=opts.batch_size,
        learning_rate=train.learning_rate,
        beta=train.beta,
        logging_steps=max(1, opts.steps // 4),
        threads=1,
    )


def train_every_arm(
    jobs: list[tuple[str, int]],
    opts: ProveOptions,
    traffic: Traffic,
    baseline: Baseline,
    *,
    budget: TrainConfig,
    settings: Settings,
) -> list[ArmRun]:
    """Train and score every (arm, seed) of ``jobs`` with ``budget``, ``opts.workers`` at a
    time, reporting each as it ends (the progress's first two steps are the base model and
    the traffic, its last the report)."""
    total = len(jobs) + 3
    report_progress(JOB, f"train {len(jobs)} runs", done=2, total=total)

    def done(run: object, n: int, of: int) -> None:
        arm, seed = getattr(run, "arm", "?"), getattr(run, "seed", "?")
        acc = getattr(run, "accuracy", 0.0)
        report_progress(
            JOB, f"{arm} seed {seed}: golden {acc:.1%} ({n}/{of})", done=2 + n, total=total
        )

    return train_arms(
        jobs,
        traffic=traffic,
        budget=budget,
        baseline=baseline,
        settings=settings,
        workers=opts.workers,
        on_done=done,
    )


def ablation_of(
    runs: list[ArmRun],
    opts: ProveOptions,
    base_version: str,
    traffic: Traffic,
    baseline: Baseline,
    budget: TrainConfig,
    wall_s: float,
    phases: dict[str, float],
) -> Ablation:
    """The whole ablation: every arm summarized over its seeds, the loop against the control,
    the budget, the traffic's counts, the run's wall time and phases, and how loaded the
    machine was."""
    items = len(baseline.scores)
    return Ablation(
        base_version=base_version,
        base_accuracy=baseline.accuracy,
        golden_items=items,
        seeds=list(range(opts.seeds)),
        budget={k: v for k, v in budget.hyperparameters().items() if k != "seed"},
        traffic=traffic_summary(traffic),
        arms=summarize(runs, arms=opts.arms, base_accuracy=baseline.accuracy, items=items),
        runs=runs,
        comparison=loop_vs_control(runs),
        workers=opts.workers,
        wall_s=wall_s,
        phases_s=phases,
        load=machine_load(),
    )


def publish_ablation(ablation: Ablation, out: Path, *, total: int) -> None:
    """Write report.md, chart.png and ablation.json under ``out``, the ``prove-report``
    artifact, the last progress step (``total``), and the table with the report's path in the
    log."""
    files = write_report(ablation, out)
    create_markdown_artifact(
        key="prove-report",
        markdown=markdown(ablation, None),
        description="flywheel prove: loop vs controls on the same traffic",
    )
    report_progress(JOB, "done", done=total, total=total)
    get_run_logger().info("%s\nreport: %s", text_table(ablation), files["report"])
