"""The steps of one ``release`` flow run (flows/release.py): its shared state
(:class:`ReleaseRun`), the golden gate, the shadow phase, each canary step, and the
``release_outcomes`` row once the canary was watched."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prefect.artifacts import create_markdown_artifact

from infra.errors import ControlRefused, ModelServerError, ObjectNotFound, ReleaseError
from infra.routing import RoutingBackend, RoutingState, open_routing, scoped
from infra.serving.base_servers import open_model_server
from infra.serving.models import ServableVersions
from infra.settings.workloads import configured_workload
from tasks.monitors import gate_gauges
from tasks.release.canary.canary import watch_step_task
from tasks.release.canary.rollout import Clock, watch_shadow_task
from tasks.release.gate.eval_rows import write_eval_results_task
from tasks.release.gate.gate import golden_gate_task
from tasks.release.gate.gate_inputs import coverage_warnings, gate_inputs, pii_engine, scorer
from tasks.release.gate.report import gate_evidence, read_report, report_markdown, write_report_task
from tasks.release.machine import controls
from tasks.release.machine.adapters import load_candidate_task
from tasks.release.machine.machine import (
    after_canary_step_task,
    after_shadow_task,
    apply_gate_task,
    begin_release_task,
    hold_task,
)
from tasks.release.machine.outcome import ReleaseOutcome
from tasks.release.machine.serving import hold_unloadable, require_room, server_args
from tasks.release.machine.transitions import Resume
from tasks.release.options import ReleaseOptions, continued_options

if TYPE_CHECKING:
    from infra.metrics.promql import CanaryMetrics
    from infra.metrics.stage import StageReport
    from infra.runtime import Runtime
    from infra.serving.model_server import ModelServer
    from infra.settings import ReleaseSettings
    from tasks.release.gate.agreement import OutcomeRow


@dataclass(kw_only=True)
class ReleaseRun:
    """What the steps of one release run share."""

    rt: Runtime
    routing: RoutingBackend
    whole: RoutingBackend  # every line's routing (the model server serves them all)
    version: str
    opts: ReleaseOptions
    policy: ReleaseSettings
    out: ReleaseOutcome
    metrics: CanaryMetrics | None = None
    stable: str = ""
    gauges: dict[str, float] = field(default_factory=dict)  # the gate's monitors (KL)
    server: ModelServer | None = None  # the model server the candidate is loaded into
    release_id: str | None = None  # every decision of this run names its release
    canary: list[dict[str, Any]] = field(default_factory=list)  # each step's evidence
    canary_start: datetime | None = None  # when this run's first canary step began


def start_run(rt: Runtime, version: str, opts: ReleaseOptions) -> ReleaseRun:
    """The run's shared state, once ``version`` is known servable and not retired (before any
    transition: a version nothing can serve must never become the candidate)."""
    ServableVersions.from_settings(rt.settings, rt.store).require(version)
    whole = open_routing(rt.settings, rt.store, catalog=rt.catalog)
    routing = scoped(whole, configured_workload(opts.workload, rt.settings.workloads))
    if why := controls.retired_refusal(state := routing.load(), version):
        raise ControlRefused(why)
    opts = continued_options(opts, state, version)  # a student resumed stays one
    return ReleaseRun(
        rt=rt,
        routing=routing,
        whole=whole,
        version=version,
        opts=opts,
        policy=opts.policy(
            rt.settings.release, rt.settings.cost.ratio_max, margin=rt.settings.distil.margin
        ),
        out=ReleaseOutcome(version=version, workload=opts.workload),
        server=open_model_server(rt.settings, rt.store),
    )


def ready_server(run: ReleaseRun, state: RoutingState) -> None:
    """With a model server: room for the candidate's adapter (before any transition), and the
    adapter loaded again for a release continued in shadow or canary."""
    if run.server is None:
        return
    require_room(run.rt, run.server, run.whole.load(), run.version)
    if state.phase in ("shadow", "canary"):  # continued
        load_candidate_task(run.server, run.rt.store, run.version, **server_args(run.rt))


def gate_step(run: ReleaseRun) -> tuple[RoutingState, str]:
    """The golden gate: begin, answer and score, report, and the transition it decides;
    returns the state and the gate's decision."""
    rt, opts, version = run.rt, run.opts, run.version
    state = begin_release_task(run.routing, rt.catalog, version, actor=opts.actor, force=opts.force)
    run.release_id = state.release_id
    try:
        if run.server is not None:  # the gate asks the candidate on the model server
            load_candidate_task(run.server, rt.store, version, **server_args(rt))
        inputs = gate_inputs(rt, opts, run.policy, version=version, stable=state.stable)
        result = golden_gate_task(inputs)
    except ModelServerError as exc:  # a replica that cannot load it holds the release
        run.out.reasons = [str(exc)]
        return hold_unloadable(
            run.routing, rt.catalog, version, actor=opts.actor, exc=exc, release_id=run.release_id
        )
    except Exception as exc:  # the release must not stay "gating" with nobody running it
        with suppress(ReleaseError):
            hold_task(
                run.routing,
                rt.catalog,
                version,
                actor=opts.actor,
                resume=Resume(phase="gating"),
                reason=f"gate could not run: {type(exc).__name__}",
                evidence={"error": repr(exc)[:500]},
                release_id=run.release_id,
            )
        raise
    result.warnings += coverage_warnings(rt, opts.workload, inputs.golden_version or "")
    run.gauges = gate_gauges(result.checks)
    run.out.report_keys = write_report_task(rt.store, result)
    write_eval_results_task(rt.catalog, result)
    create_markdown_artifact(
        key=f"gate-{version.lower()}",
        markdown=report_markdown(result),
        description=f"release gate {version} vs {result.baseline}: {result.decision.value}",
    )
    run.out.gate = gate_evidence(result, run.out.report_keys)
    run.out.reasons = list(result.reasons)
    state = apply_gate_task(
        run.routing,
        rt.catalog,
        result,
        gate=run.out.gate,
        policy=run.policy,
        actor=opts.actor,
        skip_shadow=opts.skip_shadow,
        release_id=run.release_id,
    )
    return state, result.decision.value


def shadow_step(run: ReleaseRun) -> tuple[RoutingState, str]:
    """Mirror traffic to the candidate and judge the pairs; on to the canary, or concluded.
    Returns the state and the phase's verdict."""
    result = watch_shadow_task(
        run.routing,
        run.version,
        source=run.rt.trace_source(),
        scorer=scorer(run.rt),
        policy=run.policy,
        clock=Clock(),
        pii=pii_engine(run.rt, run.policy),
    )
    run.out.phases.append({"phase": "shadow", "verdict": result.verdict, "reasons": result.reasons})
    run.out.reasons = list(result.reasons)
    state = after_shadow_task(
        run.routing,
        run.rt.catalog,
        run.version,
        result=result,
        policy=run.policy,
        actor=run.opts.actor,
        release_id=run.release_id,
    )
    return state, result.verdict


def canary_step(run: ReleaseRun, index: int) -> tuple[RoutingState, str]:
    """Watch canary step ``index``; on to the next step or promoted, or concluded. Returns
    the state and the step's verdict."""
    if run.metrics is None:
        from infra.metrics.canary_metrics import open_canary_metrics

        admin_url, token = run.rt.settings.gateway.metrics_source(
            run.opts.gateway_url, admin_url=run.opts.admin_url
        )
        run.metrics = open_canary_metrics(
            prometheus_url=run.policy.prometheus_url, admin_url=admin_url, admin_token=token
        )
        run.stable = run.routing.load().stable
    run.canary_start = run.canary_start or datetime.now(UTC)
    result = watch_step_task(
        run.routing,
        run.version,
        stable=run.stable,
        metrics=run.metrics,
        policy=run.policy,
        clock=Clock(),
    )
    run.canary.append(result.evidence)
    run.out.phases.append(
        {
            "phase": "canary",
            "step": index,
            "weight": run.policy.canary_weight(index),
            "verdict": result.verdict,
            "reasons": result.reasons,
        }
    )
    passed_all = result.verdict == "pass" and index + 1 == len(run.policy.canary_steps)
    run.out.reasons = (
        [f"canary passed {len(run.policy.canary_steps)} steps"]
        if passed_all
        else list(result.reasons)
    )
    state = after_canary_step_task(
        run.routing,
        run.rt.catalog,
        run.version,
        step=index,
        result=result,
        policy=run.policy,
        actor=run.opts.actor,
        release_id=run.release_id,
    )
    return state, result.verdict


def record_outcome(run: ReleaseRun, outcome: str, report: StageReport) -> OutcomeRow:
    """The release's ``release_outcomes`` row (:mod:`tasks.release.gate.agreement`): the gate's
    estimate (its stored report) beside the canary steps this run watched; its gauges."""
    from tasks.release.gate.agreement import Release, outcome_row, report_outcome, write_outcome
    from tasks.release.gate.agreement_online import CanaryWatch, live_verifier

    try:
        gate = read_report(run.rt.store, run.version)
    except ObjectNotFound:  # no gate report (a person promoted past the gate): online only
        gate = {}
    end = datetime.now(UTC)
    start = run.canary_start or end
    baseline = run.stable or str(gate.get("baseline"))
    release = Release(
        release_id=run.release_id or "",
        workload=run.opts.workload,
        version=run.version,
        baseline=baseline,
        outcome=outcome,
    )
    verifier = live_verifier(
        run.rt.store,
        since=start,
        until=end,
        versions=[run.version, baseline],
        workload=run.opts.workload,
    )
    canary = CanaryWatch(windows=run.canary, start=start, end=end, verifier=verifier)
    row = outcome_row(release, gate=gate, canary=canary, alpha=run.policy.alpha)
    report_outcome(report, write_outcome(run.rt.catalog, row))
    return row
