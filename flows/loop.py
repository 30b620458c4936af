"""The whole loop: the hourly data flow and ``run`` (the README's main job: one or more
improvement cycles on embedded defaults). The weekly train-and-release flow is
:mod:`flows.weekly`; the summary ``flywheel run`` prints is
:func:`tasks.demo.loop_summary.loop_report`, its plumbing (gateway, background traffic,
progress) :mod:`tasks.demo.loop`."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime

from prefect import flow, get_run_logger
from pydantic import BaseModel, Field, model_validator

from flows.collect import collect
from flows.curate import curate
from flows.distil import distil
from flows.release import ReleaseOptions, release
from flows.score import score
from flows.train import train
from infra.flow_docs import described
from infra.keys import parse_window_start
from infra.parameters import LOOP_REQUESTS, TrainMethod
from infra.routing import load_state
from infra.runtime import Runtime
from tasks.demo.bootstrap import bootstrap_base_model
from tasks.demo.distil_summary import DistilSummary, cost_meter, read_costs
from tasks.demo.loop import (
    Steps,
    background_traffic,
    demo_verifiers,
    embedded_gateway,
    hourly_windows,
)
from tasks.demo.loop_summary import CycleSummary, LoopSummary
from tasks.demo.serving import Server, environment, profile_environment, serving
from tasks.demo.simulate import simulate
from tasks.demo.workloads import of_settings, tagged

TRACE_FLUSH_WAIT_S = 2.5


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


class LoopOptions(BaseModel):
    """Knobs of the embedded demo loop (flywheel run); stage settings come from FLYWHEEL_*."""

    cycles: int = Field(
        default=1,
        ge=0,
        le=20,
        description="improvement cycles to run (0 with distil: distil what is curated already)",
    )
    requests: int = Field(
        default=LOOP_REQUESTS,
        ge=10,
        description="simulated user requests per cycle, every workload's together",
    )
    concurrency: int = Field(
        default=8, ge=1, le=64, description="simulated users sending requests at once"
    )
    seed: int = Field(
        default=0, description="random seed of the base model and the simulated traffic"
    )
    method: TrainMethod = Field(default="dpo", description="training method (auto: by data size)")
    canary_steps: list[int] = Field(
        default=[25, 50, 100], description="candidate's share of traffic (%) at each step"
    )
    analysis_interval_s: float = Field(default=3.0, gt=0, description="hold per canary step")
    min_requests_per_step: int = Field(
        default=10, ge=1, description="candidate requests a canary step needs before a verdict"
    )
    release_traffic_batch: int = Field(default=40, ge=1, description="requests per traffic burst")
    diverse_fraction: float = Field(
        default=1.0, ge=0, le=1, description="share of requests sampled several times"
    )
    diverse_temperatures: list[float] = Field(
        default=[0.7, 0.9, 1.1, 1.3], description="temperatures of those samples, one answer each"
    )
    server: Server = Field(
        default="local",
        description="local: the demo model in process; vllm: the Llama profile on a local vLLM",
    )
    on_policy: bool = Field(
        default=True,
        description="train each cycle only on traffic its baseline served (not older versions')",
    )
    distil: bool = Field(
        default=False,
        description="after the cycles, distil each workload's stable version into a smaller "
        "student and release it when it is no worse (non-inferiority) and cheaper",
    )
    distil_steps: int | None = Field(
        default=None, ge=1, description="optimizer steps per student (FLYWHEEL_DISTIL__STEPS)"
    )

    @model_validator(mode="after")
    def _something_to_do(self) -> LoopOptions:
        if self.cycles == 0 and not self.distil:
            raise ValueError("cycles 0 runs nothing: it is for distil alone (--distil)")
        return self


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
                cycles += _cycle(cycle, lines, gateway_url=gateway_url, opts=opts, steps=steps)
            distilled = [
                _distil(w, gateway_url=gateway_url, opts=opts, steps=steps) for w in distils
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


def _cycle(
    cycle: int, lines: list[str | None], *, gateway_url: str, opts: LoopOptions, steps: Steps
) -> list[CycleSummary]:
    """One cycle: simulated traffic, then collect, score and curate once, then each release
    line (a workload, or None: the shared one) trained and released on its own."""
    rt = Runtime.from_env()
    began = datetime.now(UTC)
    steps.start(f"cycle {cycle}: {opts.requests} simulated requests through the gateway")
    simulate(
        gateway_url,
        requests=opts.requests,
        concurrency=opts.concurrency,
        seed=opts.seed * 1000 + cycle,
        settings=rt.settings,
    )
    time.sleep(TRACE_FLUSH_WAIT_S)  # the gateway's sink writes the spool every second
    hours = hourly_windows(began, datetime.now(UTC))
    steps.start(f"cycle {cycle}: collect, score and curate {len(hours)} hourly window(s)")
    shared = CycleSummary(cycle=cycle, baseline="")
    for start in hours:
        collected = collect(window_start=start, hours=1)
        score(window_start=start, hours=1)
        curated = curate(window_start=start)
        shared.add_window(collected, curated)
    out = []
    for workload in lines:
        baseline = load_state(rt.store).release_of(workload).stable
        summary = replace(shared, workload=workload, baseline=baseline)
        out.append(_train_and_release(summary, gateway_url=gateway_url, opts=opts, steps=steps))
    return out


def _train_and_release(
    summary: CycleSummary, *, gateway_url: str, opts: LoopOptions, steps: Steps
) -> CycleSummary:
    """Train a candidate on ``summary.workload``'s traffic and release it for that workload
    alone (its golden set, its shadow and canary traffic); the others' routing is untouched."""
    cycle, workload = summary.cycle, summary.workload
    of = f" for {workload}" if workload else ""
    steps.start(f"cycle {cycle}: train a candidate{of} on the curated traffic ({opts.method})")
    trained = train(method=opts.method, workload=workload)
    summary.add_training(trained)
    if trained.status != "trained" or not trained.version:
        return summary
    steps.start(f"cycle {cycle}: release {trained.version}{of} (golden gate, shadow, canary)")
    with background_traffic(
        gateway_url,
        requests=opts.release_traffic_batch,
        concurrency=min(4, opts.concurrency),
        seed=opts.seed * 1000 + cycle * 100,
    ):
        released = release(trained.version, _release_options(workload, gateway_url, opts))
    summary.add_release(released)
    return summary


def _distil(
    workload: str | None, *, gateway_url: str, opts: LoopOptions, steps: Steps
) -> DistilSummary:
    """Distil ``workload``'s stable version into a student and release it as a cheaper model
    (non-inferiority gate, shadow, canary with the cost rail), its cost metered meanwhile."""
    of = f" for {workload}" if workload else ""
    steps.start(f"distil a smaller student{of} from its stable version's accepted traffic")
    result = distil(workload=workload, max_steps=opts.distil_steps)
    summary = DistilSummary.of(result)
    if result.status != "trained" or not result.version:
        return summary
    steps.start(f"release student {result.version}{of} (non-inferiority gate, shadow, canary)")
    meter, since = cost_meter(gateway_url)
    with background_traffic(
        gateway_url,
        requests=opts.release_traffic_batch,
        concurrency=min(4, opts.concurrency),
        seed=opts.seed * 1000 + 999,
    ):
        options = _release_options(workload, gateway_url, opts, non_inferior=True)
        released = release(result.version, options)
    teacher, student = read_costs(
        meter, teacher=result.teacher, student=result.version, since=since, workload=workload
    )
    summary.add_release(released, teacher=teacher, student=student)
    return summary


def _release_options(
    workload: str | None, gateway_url: str, opts: LoopOptions, *, non_inferior: bool = False
) -> ReleaseOptions:
    """The loop's release of a candidate (or, ``non_inferior``, of a student) for ``workload``."""
    return ReleaseOptions(
        workload=workload,
        canary_steps=opts.canary_steps,
        analysis_interval_s=opts.analysis_interval_s,
        min_requests_per_step=opts.min_requests_per_step,
        gateway_url=gateway_url,
        # generous: on a busy small machine shadow pairs come slowly
        step_deadline_s=max(240.0, 10 * opts.analysis_interval_s),
        actor="flywheel-run",
        non_inferior=non_inferior,
    )
