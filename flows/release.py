"""Stage 5 flow: ``release`` (gate -> shadow -> canary steps -> promote, or roll back / hold).
A person's decisions on a release in progress are the ``release-control`` flow
(flows/release_control.py)."""

from __future__ import annotations

from prefect import flow

from infra.flow_docs import described
from infra.parameters import ModelVersion
from infra.runtime import Runtime
from tasks.monitors import report_gauges
from tasks.release.machine.card import update_card
from tasks.release.machine.machine import next_step, plan_release
from tasks.release.machine.outcome import CONCLUDED, NOTHING_TO_DO, ReleaseOutcome, conclude
from tasks.release.machine.serving import unload_unrouted
from tasks.release.machine.steps import (
    canary_step,
    gate_step,
    ready_server,
    record_outcome,
    shadow_step,
    start_run,
)
from tasks.release.options import ReleaseOptions

__all__ = ["ReleaseOptions", "release"]


@described
@flow(name="release", log_prints=False)
def release(
    version: ModelVersion,
    options: ReleaseOptions = ReleaseOptions(),  # noqa: B008 - the form shows its fields
) -> ReleaseOutcome:
    """Release a candidate model version: the golden-set regression gate (paired t-test and
    Wilcoxon, bootstrap CI, slices, KL / diversity / length-bias checks; report in
    gates/<version>/), then shadow traffic scored with the stage-2 reward, then canary steps
    analysed from Prometheus, then promote. A failure rolls the candidate back (it is never
    released automatically again); an inconclusive result holds it for a person. Running it
    again for a release left in shadow or canary continues where it stopped. A version that
    cannot be served (no complete model in the store, no upstream configured) is refused
    before the routing state is touched, and so is a version retired after an erasure. With a
    workload (one FLYWHEEL_WORKLOADS lists), every transition acts on that workload's release
    alone (the others' routing and the shared release are never changed by it).

    Args:
        version: The candidate model version, e.g. v3 (as train published it).
        options: Baseline, golden set and pacing of this release. Fields left empty: the
            settings' policy (FLYWHEEL_RELEASE__*) against the stable version.
    """
    rt = Runtime.from_env()
    opts = options
    run = start_run(rt, version, opts)
    with rt.reporting("release") as report:
        state = run.routing.load()
        run.release_id = state.release_id  # a continued release (a new one: set by the gate)
        plan = plan_release(state, version, force=opts.force)
        if plan in NOTHING_TO_DO:
            return conclude(run.out, plan, state, [NOTHING_TO_DO[plan].format(v=version)])
        ready_server(run, state)
        verdict: str | None = None  # of the step this run did last
        while (step := next_step(state, version, last=verdict, force=opts.force)) is not None:
            if step.kind == "gate":
                state, verdict = gate_step(run)
                report.count("flywheel_gate_decisions_total", decision=verdict)
                report_gauges(report, run.gauges, model=version)
            elif step.kind == "shadow":
                state, verdict = shadow_step(run)
            else:
                state, verdict = canary_step(run, step.index)
            update_card(rt.store, version, state=state, gate=run.out.gate)
        outcome = CONCLUDED.get(state.phase, "interrupted")
        if run.canary_start is not None:
            record_outcome(run, outcome, report)
    unload_unrouted(rt, run.server, state)
    return conclude(run.out, outcome, state, run.out.reasons)
