"""``prove``: the ablation that shows whether the loop's reward, and not only its plumbing,
makes the model better (``flywheel prove``, ``make prove``; a benchmark, not a CI test).

One shared traffic sample from the base model; every arm (:mod:`tasks.prove.arms`) trained
with the same budget for several seeds and scored on the golden set; a confidence interval per
arm and a paired test of the loop against a shuffled-reward control (:mod:`tasks.prove.stats`);
``report.md``, ``chart.png`` and ``ablation.json`` under ``$FLYWHEEL_HOME/prove`` (or
``out``) and the report as a Prefect artifact.

The base model is the version ``base`` names in the store, else the embedded demo's v0 (this
flow bootstraps it, as ``flywheel run`` does); the questions, the golden set and its verifier
are those the settings name (FLYWHEEL_REWARD__QUESTIONS, FLYWHEEL_REWARD__GOLDEN,
FLYWHEEL_REWARD__VERIFIER; the demo's without them), each loaded by name
(:mod:`tasks.prove.sources`)."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, Field

from infra.errors import InsufficientTraffic
from infra.progress import report_progress
from infra.runtime import Runtime
from tasks.golden import settings_golden
from tasks.prove.arms import ARMS, CONTROL, LOOP, Baseline, golden_answers, golden_scores
from tasks.prove.report import markdown, text_table, write_report
from tasks.prove.run import (
    Ablation,
    loop_vs_control,
    machine_load,
    summarize,
    timed,
    traffic_summary,
    train_arms,
)
from tasks.prove.sources import base_model, sample_questions
from tasks.prove.traffic import Traffic, build_traffic
from tasks.train.config import TrainConfig


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


@task(cache_policy=NO_CACHE)
def traffic_task(model_dir: Path, opts: ProveOptions) -> Traffic:
    """Returns the shared traffic: sampled once from the base model, scored, selected."""
    from infra.local_lm import LocalLM

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


@flow(name="prove", log_prints=False)
def prove(options: ProveOptions = ProveOptions()) -> Ablation:  # noqa: B008 - a form
    """Ablation on one shared traffic sample: the loop's default (DPO + SFT term), a
    shuffled-reward control, RFT, GRPO, plain DPO and an oracle SFT ceiling, each trained with
    the same budget for several seeds and scored on the golden set; writes report.md,
    chart.png and ablation.json and a markdown artifact.

    Args:
        options: Seeds, steps, traffic size, worker processes and the base model version (the
            defaults shown).
    """
    opts = options
    unknown = sorted(set(opts.arms) - set(ARMS))
    if unknown or not {LOOP, CONTROL} <= set(opts.arms):
        raise ValueError(f"arms must be among {list(ARMS)} and include {LOOP} and {CONTROL}")
    logger = get_run_logger()
    rt = Runtime.from_env()
    started = phase = time.perf_counter()
    phases: dict[str, float] = {}
    jobs = [(arm, seed) for arm in opts.arms for seed in range(opts.seeds)]
    total = len(jobs) + 3
    step = f"fetch the base model {opts.base}" if opts.base else "bootstrap the base model v0"
    report_progress("prove", f"{step} (cached)", done=0, total=total)
    boot = base_model(rt.store, settings=rt.settings, version=opts.base, seed=opts.seed)
    phase = timed(phases, "bootstrap", phase)
    report_progress(
        "prove", f"shared traffic: {opts.prompts} prompts from {boot.version}", done=1, total=total
    )
    traffic = traffic_task(boot.model_dir, opts)
    baseline = baseline_task(boot.model_dir)
    phase = timed(phases, "traffic", phase)
    sel = traffic.selection
    need = rt.settings.train.min_pairs
    if len(sel.pairs) < need or len(sel.sft) < need:
        raise InsufficientTraffic(
            f"the shared traffic gave {len(sel.pairs)} preference pairs and {len(sel.sft)} good "
            f"answers (< FLYWHEEL_TRAIN__MIN_PAIRS {need}): send more prompts (--prompts) or "
            f"start from a base model that is right more often (--base) ({baseline.accuracy:.1%} golden)"
        )
    logger.info(
        "traffic: %d pairs, %d singles, %d prompts", len(sel.pairs), len(sel.sft), len(sel.prompts)
    )
    budget = TrainConfig(
        max_steps=opts.steps,
        batch_size=opts.batch_size,
        learning_rate=rt.settings.train.learning_rate,
        beta=rt.settings.train.beta,
        logging_steps=max(1, opts.steps // 4),
        threads=1,
    )
    report_progress("prove", f"train {len(jobs)} runs", done=2, total=total)

    def done(run: object, n: int, of: int) -> None:
        arm, seed = getattr(run, "arm", "?"), getattr(run, "seed", "?")
        acc = getattr(run, "accuracy", 0.0)
        report_progress(
            "prove", f"{arm} seed {seed}: golden {acc:.1%} ({n}/{of})", done=2 + n, total=total
        )

    runs = train_arms(
        jobs,
        traffic=traffic,
        budget=budget,
        baseline=baseline,
        settings=rt.settings,
        workers=opts.workers,
        on_done=done,
    )
    timed(phases, "arms", phase)
    items = len(baseline.scores)
    ablation = Ablation(
        base_version=boot.version,
        base_accuracy=baseline.accuracy,
        golden_items=items,
        seeds=list(range(opts.seeds)),
        budget={k: v for k, v in budget.hyperparameters().items() if k != "seed"},
        traffic=traffic_summary(traffic),
        arms=summarize(runs, arms=opts.arms, base_accuracy=baseline.accuracy, items=items),
        runs=runs,
        comparison=loop_vs_control(runs),
        workers=opts.workers,
        wall_s=time.perf_counter() - started,
        phases_s=phases,
        load=machine_load(),
    )
    out = Path(opts.out) if opts.out else rt.settings.home_dir / "prove"
    files = write_report(ablation, out)
    create_markdown_artifact(
        key="prove-report",
        markdown=markdown(ablation, None),
        description="flywheel prove: loop vs controls on the same traffic",
    )
    report_progress("prove", "done", done=total, total=total)
    logger.info("%s\nreport: %s", text_table(ablation), files["report"])
    return ablation
