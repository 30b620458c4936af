"""Stage 5 flow: ``release`` (gate -> shadow -> canary steps -> promote, or roll back / hold).
A person's decisions on a release in progress are the ``release-control`` flow
(flows/release_control.py)."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from infra.answers import open_answer_source
from infra.base_servers import open_model_server
from infra.errors import ControlRefused, ModelServerError, ObjectNotFound, ReleaseError
from infra.flow_docs import described
from infra.models import ServableVersions
from infra.parameters import ModelVersion
from infra.routing import RoutingBackend, RoutingState, open_routing, scoped
from infra.runtime import Runtime
from infra.settings.workloads import configured_workload
from tasks.golden import GoldenItem, golden_version, load_golden, settings_golden_set
from tasks.monitors import gate_gauges, report_gauges
from tasks.release import controls
from tasks.release.adapters import load_candidate_task
from tasks.release.canary import watch_step_task
from tasks.release.card import update_card
from tasks.release.eval_rows import write_eval_results_task
from tasks.release.gate import golden_gate_task
from tasks.release.machine import (
    after_canary_step_task,
    after_shadow_task,
    apply_gate_task,
    begin_release_task,
    hold_task,
    next_step,
    plan_release,
)
from tasks.release.options import ReleaseOptions, continued_options
from tasks.release.outcome import CONCLUDED, NOTHING_TO_DO, ReleaseOutcome, conclude
from tasks.release.report import gate_evidence, read_report, report_markdown, write_report_task
from tasks.release.rollout import Clock, watch_shadow_task
from tasks.release.serving import hold_unloadable, require_room, server_args, unload_unrouted

if TYPE_CHECKING:
    from infra.metrics import StageReport
    from infra.model_server import ModelServer
    from infra.promql import CanaryMetrics
    from infra.settings import ReleaseSettings


@dataclass(kw_only=True)
class _Run:
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
    run = _start(rt, version, opts)
    with rt.reporting("release") as report:
        state = run.routing.load()
        run.release_id = state.release_id  # a continued release (a new one: set by the gate)
        plan = plan_release(state, version, force=opts.force)
        if plan in NOTHING_TO_DO:
            return conclude(run.out, plan, state, [NOTHING_TO_DO[plan].format(v=version)])
        _ready_server(run, state)
        verdict: str | None = None  # of the step this run did last
        while (step := next_step(state, version, last=verdict, force=opts.force)) is not None:
            if step.kind == "gate":
                state, verdict = _gate(run)
                report.count("flywheel_gate_decisions_total", decision=verdict)
                report_gauges(report, run.gauges, model=version)
            elif step.kind == "shadow":
                state, verdict = _shadow(run)
            else:
                state, verdict = _canary_step(run, step.index)
            update_card(rt.store, version, state=state, gate=run.out.gate)
        outcome = CONCLUDED.get(state.phase, "interrupted")
        if run.canary_start is not None:
            record_outcome(run, outcome, report)
    unload_unrouted(rt, run.server, state)
    return conclude(run.out, outcome, state, run.out.reasons)


def _start(rt: Runtime, version: str, opts: ReleaseOptions) -> _Run:
    """The run's shared state, once ``version`` is known servable and not retired (before any
    transition: a version nothing can serve must never become the candidate)."""
    ServableVersions.from_settings(rt.settings, rt.store).require(version)
    whole = open_routing(rt.settings, rt.store, catalog=rt.catalog)
    routing = scoped(whole, configured_workload(opts.workload, rt.settings.workloads))
    if why := controls.retired_refusal(state := routing.load(), version):
        raise ControlRefused(why)
    opts = continued_options(opts, state, version)  # a student resumed stays one
    return _Run(
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


def _ready_server(run: _Run, state: RoutingState) -> None:
    """With a model server: room for the candidate's adapter (before any transition), and the
    adapter loaded again for a release continued in shadow or canary."""
    if run.server is None:
        return
    require_room(run.rt, run.server, run.whole.load(), run.version)
    if state.phase in ("shadow", "canary"):  # continued
        load_candidate_task(run.server, run.rt.store, run.version, **server_args(run.rt))


def _golden(rt: Runtime, path: str | None, workload: str | None) -> tuple[list[GoldenItem], str]:
    """The run's golden set and its version: ``path``, else the one the settings name for
    ``workload`` (its own: FLYWHEEL_REWARD__GOLDEN_SETS or golden/<workload>/, else
    FLYWHEEL_REWARD__GOLDEN); items of a workload's own set are scored by its verifier."""
    if path:
        return load_golden(path, workload=workload), golden_version(path)
    return settings_golden_set(rt.settings.reward, workload, workloads=rt.settings.workloads)


def _gate(run: _Run) -> tuple[RoutingState, str]:
    """The golden gate: begin, answer and score, report, and the transition it decides;
    returns the state and the gate's decision."""
    rt, opts, version = run.rt, run.opts, run.version
    state = begin_release_task(run.routing, rt.catalog, version, actor=opts.actor, force=opts.force)
    run.release_id = state.release_id
    try:
        if run.server is not None:  # the gate asks the candidate on the model server
            load_candidate_task(run.server, rt.store, version, **server_args(rt))
        items, golden = _golden(rt, opts.golden_path, opts.workload)
        result = golden_gate_task(
            items[: opts.max_golden_items],
            golden_version=golden,
            baseline=open_answer_source(
                opts.baseline or state.stable, settings=rt.settings, store=rt.store
            ),
            candidate=open_answer_source(version, settings=rt.settings, store=rt.store),
            scorer=_scorer(rt),
            policy=run.policy,
            max_tokens=rt.settings.gateway.max_new_tokens,
            pii=_pii_engine(rt, run.policy),
            workload=opts.workload,
            margin=opts.gate_margin(rt.settings.distil.margin),
            cheaper=opts.cheaper,
        )
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
                resume_to="gating",
                reason=f"gate could not run: {type(exc).__name__}",
                evidence={"error": repr(exc)[:500]},
                release_id=run.release_id,
            )
        raise
    result.warnings += _coverage_warnings(rt, opts.workload, golden)
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


def _coverage_warnings(rt: Runtime, workload: str | None, golden: str) -> list[str]:
    """The gate report's warning when the last curate run found the golden set covering
    less of the workload's prompts than FLYWHEEL_CURATE__COVERAGE_MIN."""
    from tasks import golden_coverage
    from tasks.reward.verifiers import DEFAULT_WORKLOAD

    measured = golden_coverage.latest(rt.store, workload or DEFAULT_WORKLOAD)
    why = golden_coverage.gate_warning(
        measured, minimum=rt.settings.curate.coverage_min, golden_version=golden
    )
    return [why] if why else []


def _shadow(run: _Run) -> tuple[RoutingState, str]:
    """Mirror traffic to the candidate and judge the pairs; on to the canary, or concluded.
    Returns the state and the phase's verdict."""
    result = watch_shadow_task(
        run.routing,
        run.version,
        source=run.rt.trace_source(),
        scorer=_scorer(run.rt),
        policy=run.policy,
        clock=Clock(),
        pii=_pii_engine(run.rt, run.policy),
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


def _canary_step(run: _Run, index: int) -> tuple[RoutingState, str]:
    """Watch canary step ``index``; on to the next step or promoted, or concluded. Returns
    the state and the step's verdict."""
    if run.metrics is None:
        from infra.promql import open_canary_metrics

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


def record_outcome(run: _Run, outcome: str, report: StageReport) -> dict[str, Any]:
    """The release's ``release_outcomes`` row (:mod:`tasks.release.agreement`): the gate's
    estimate (its stored report) beside the canary steps this run watched; its gauges."""
    from tasks.release.agreement import live_verifier, outcome_row, report_outcome, write_outcome

    try:
        gate = read_report(run.rt.store, run.version)
    except ObjectNotFound:  # no gate report (a person promoted past the gate): online only
        gate = {}
    end = datetime.now(UTC)
    start = run.canary_start or end
    baseline = run.stable or str(gate.get("baseline"))
    row = outcome_row(
        release_id=run.release_id or "",
        workload=run.opts.workload,
        version=run.version,
        baseline=baseline,
        outcome=outcome,
        gate=gate,
        windows=run.canary,
        canary_start=start,
        canary_end=end,
        verifier=live_verifier(
            run.rt.store,
            since=start,
            until=end,
            versions=[run.version, baseline],
            workload=run.opts.workload,
        ),
        alpha=run.policy.alpha,
    )
    report_outcome(report, write_outcome(run.rt.catalog, row))
    return row


def _scorer(rt: Runtime) -> Any:
    from tasks.reward import Scorer

    return Scorer(rt.settings)


def _pii_engine(rt: Runtime, policy: ReleaseSettings) -> Any:
    """The stage-3 analyser for the PII-leak check (None when the check is off)."""
    if not policy.pii_leak_check:
        return None
    from tasks.pii.engine import PiiConfig, load_engine

    return load_engine(PiiConfig.from_settings(rt.settings.curate))
