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

from prefect import flow

from infra.flow_docs import described
from infra.progress import report_progress
from infra.runtime import Runtime
from tasks.prove.run import Ablation, timed
from tasks.prove.sources import base_model
from tasks.prove.steps import (
    ProveOptions,
    ablation_of,
    arm_budget,
    baseline_task,
    publish_ablation,
    require_arms,
    require_traffic,
    traffic_task,
    train_every_arm,
)


@described
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
    require_arms(opts.arms)
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
    require_traffic(traffic, baseline, need=rt.settings.train.min_pairs)
    budget = arm_budget(opts, rt.settings.train)
    runs = train_every_arm(jobs, opts, traffic, baseline, budget=budget, settings=rt.settings)
    timed(phases, "arms", phase)
    wall_s = time.perf_counter() - started
    ablation = ablation_of(runs, opts, boot.version, traffic, baseline, budget, wall_s, phases)
    out = Path(opts.out) if opts.out else rt.settings.home_dir / "prove"
    publish_ablation(ablation, out, total=total)
    return ablation
