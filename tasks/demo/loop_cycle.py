"""The cycle of ``flywheel run`` (the ``run`` flow, flows/loop.py): its options
(:class:`LoopOptions`), one improvement cycle (simulated traffic, then collect, score and
curate, then each release line trained and released), and a student distilled and released.
The stages are the flows themselves, passed in as :class:`Stages` (each runs as a subflow)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field, model_validator

from infra.parameters import LOOP_REQUESTS, TrainMethod
from infra.routing import load_state
from infra.runtime import Runtime
from tasks.demo.distil_summary import DistilSummary, cost_meter, read_costs
from tasks.demo.loop import Steps, background_traffic, hourly_windows
from tasks.demo.loop_summary import CycleSummary
from tasks.demo.serving import Server
from tasks.demo.simulate import simulate
from tasks.release.options import ReleaseOptions

TRACE_FLUSH_WAIT_S = 2.5


@dataclass(frozen=True, kw_only=True)
class Stages:
    """The flows a cycle runs, each as a subflow of ``run`` (flows/loop.py passes them in)."""

    collect: Callable[..., Any]
    score: Callable[..., Any]
    curate: Callable[..., Any]
    train: Callable[..., Any]
    release: Callable[..., Any]
    distil: Callable[..., Any]


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


def run_cycle(
    cycle: int,
    lines: list[str | None],
    stages: Stages,
    *,
    gateway_url: str,
    opts: LoopOptions,
    steps: Steps,
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
        collected = stages.collect(window_start=start, hours=1)
        stages.score(window_start=start, hours=1)
        curated = stages.curate(window_start=start)
        shared.add_window(collected, curated)
    out = []
    for workload in lines:
        baseline = load_state(rt.store).release_of(workload).stable
        summary = replace(shared, workload=workload, baseline=baseline)
        out.append(
            train_and_release(summary, stages, gateway_url=gateway_url, opts=opts, steps=steps)
        )
    return out


def train_and_release(
    summary: CycleSummary, stages: Stages, *, gateway_url: str, opts: LoopOptions, steps: Steps
) -> CycleSummary:
    """Train a candidate on ``summary.workload``'s traffic and release it for that workload
    alone (its golden set, its shadow and canary traffic); the others' routing is untouched."""
    cycle, workload = summary.cycle, summary.workload
    of = f" for {workload}" if workload else ""
    steps.start(f"cycle {cycle}: train a candidate{of} on the curated traffic ({opts.method})")
    trained = stages.train(method=opts.method, workload=workload)
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
        released = stages.release(trained.version, release_options(workload, gateway_url, opts))
    summary.add_release(released)
    return summary


def distil_and_release(
    workload: str | None, stages: Stages, *, gateway_url: str, opts: LoopOptions, steps: Steps
) -> DistilSummary:
    """Distil ``workload``'s stable version into a student and release it as a cheaper model
    (non-inferiority gate, shadow, canary with the cost rail), its cost metered meanwhile."""
    of = f" for {workload}" if workload else ""
    steps.start(f"distil a smaller student{of} from its stable version's accepted traffic")
    result = stages.distil(workload=workload, max_steps=opts.distil_steps)
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
        options = release_options(workload, gateway_url, opts, non_inferior=True)
        released = stages.release(result.version, options)
    teacher, student = read_costs(
        meter, teacher=result.teacher, student=result.version, since=since, workload=workload
    )
    summary.add_release(released, teacher=teacher, student=student)
    return summary


def release_options(
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
