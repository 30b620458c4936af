"""The whole loop: the hourly data flow and ``run`` (the README's main job: one or more
improvement cycles on embedded defaults). The weekly train-and-release flow is
:mod:`flows.weekly`; the summary ``flywheel run`` prints is
:func:`tasks.demo.loop_summary.loop_report`, its plumbing (gateway, background traffic,
progress) :mod:`tasks.demo.loop`, its cycle and options :mod:`tasks.demo.loop_cycle`."""

from __future__ import annotations

import time
from datetime import datetime

from prefect import flow, get_run_logger

from flows.collect import collect
from flows.curate import curate
from flows.distil import distil
from flows.release import release
from flows.score import score
from flows.train import train
from infra.flow_docs import described
from infra.keys import parse_window_start
from infra.runtime import Runtime
from tasks.demo.bootstrap import bootstrap_base_model
from tasks.demo.loop import Steps, demo_verifiers, embedded_gateway
from tasks.demo.loop_cycle import LoopOptions, Stages, distil_and_release, run_cycle
from tasks.demo.loop_summary import CycleSummary, LoopSummary
from tasks.demo.serving import environment, profile_environment, serving
from tasks.demo.workloads import of_settings, tagged

__all__ = ["LoopOptions", "hourly", "run_loop"]

# each stage of a cycle runs as a subflow of ``run``
STAGES = Stages(
    collect=collect, score=score, curate=curate, train=train, release=release, distil=distil
)


@described
@flow(name="hourly", log_prints=False)
def hourly(window_start: datetime | None = None) -> dict[str, object]:
    """Hourly data loop for one window (default: the last closed hour): collect the traces,
    score every one, curate them into flywheel.training_examples. Each stage is a subflow run
    of its own, so a failed stage can be retried alone from the UI.

    Args:
        window_start: The hour to process, on the hour in UTC (e.g. 2026-11-22T10:00:00Z).
            Empty: the last closed hour (what the schedule does at 5 past every hour).
    """
    start = parse_window_start(window_start)
    collected = collect(window_start=start, hours=1)
    scored = score(window_start=start, hours=1)
    curated = curate(window_start=start)
    get_run_logger().info("hourly %s done", collected.window)
    return {"collect": collected, "score": scored, "curate": curated}


@described
@flow(name="run", log_prints=False)
def run_loop(options: LoopOptions = LoopOptions()) -> LoopSummary:  # noqa: B008 - a form
    """Run the whole loop on this machine: bootstrap the base model (cached), serve it through
    the gateway, send simulated users (with personal data, consent and feedback), then collect,
    score, curate, train and release (gate -> shadow -> canary with live simulated traffic).
    Each cycle's promoted candidate is the next cycle's baseline, and the next cycle trains
    only on the traffic that baseline served (on_policy).

    Args:
        options: Cycles, simulated traffic and release pacing of this run (the defaults
            shown: one cycle of 3,200 requests).
    """
    opts = options
    started = time.monotonic()
    policy = {"FLYWHEEL_TRAIN__ON_POLICY": "true"} if opts.on_policy else {}
    with environment(**profile_environment(opts.server), **policy, **demo_verifiers(opts.server)):
        rt = Runtime.from_env()
        workloads = of_settings(rt.settings)
        lines: list[str | None] = list(workloads) if tagged(workloads) else [None]
        distils = lines if opts.distil else []
        steps = Steps(total=2 + (2 + 2 * len(lines)) * opts.cycles + 2 * len(distils))
        steps.start("bootstrap the base model v0 (shipped for the default workloads, else minutes)")
        boot = bootstrap_base_model(rt.store, settings=rt.settings, seed=opts.seed)
        cycles: list[CycleSummary] = []
        steps.start(f"start the gateway on loopback (models served by {opts.server})")
        with (
            serving(opts.server, base_version=boot.version),
            embedded_gateway(
                Runtime.from_env(),
                diverse_fraction=opts.diverse_fraction,
                diverse_temperatures=opts.diverse_temperatures,
            ) as gateway_url,
        ):
            for cycle in range(1, opts.cycles + 1):
                cycles += run_cycle(
                    cycle, lines, STAGES, gateway_url=gateway_url, opts=opts, steps=steps
                )
            distilled = [
                distil_and_release(w, STAGES, gateway_url=gateway_url, opts=opts, steps=steps)
                for w in distils
            ]
    steps.finish()
    return LoopSummary(
        base_version=boot.version,
        base_accuracy=boot.golden_accuracy,
        bootstrap_cached=boot.cached,
        cycles=cycles,
        wall_s=time.monotonic() - started,
        base_accuracy_by_workload=boot.accuracy_by_workload,
        distilled=distilled,
    )
