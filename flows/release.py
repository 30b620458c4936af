"""Stage 5 flows: ``release`` (gate -> shadow -> canary -> promote, or roll back / hold) and
``release-control`` (a person's promote / pause / resume / abort)."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Literal

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from pydantic import BaseModel, Field, field_validator

from infra.answers import open_answer_source
from infra.errors import ReleaseError
from infra.gateway.state import RoutingState, load_state
from infra.runtime import Runtime
from tasks import release as rel
from tasks.drift import DriftConfig
from tasks.gate import GateConfig, golden_gate_task, write_eval_results_task
from tasks.gate_report import report_markdown, write_report_task
from tasks.rollout import Clock, PhaseResult, watch_shadow_task, watch_step_task


class ReleaseOptions(BaseModel):
    """Per-run knobs; unset ones come from settings (FLYWHEEL_RELEASE__*)."""

    baseline: str | None = Field(
        default=None, description="version to beat (default: the stable one)"
    )
    force: bool = Field(default=False, description="release a version that was rejected before")
    skip_shadow: bool = False
    shadow_fraction: float | None = Field(default=None, ge=0, le=1)
    canary_steps: list[int] | None = None
    analysis_interval_s: float | None = Field(default=None, gt=0)
    step_deadline_s: float | None = Field(default=None, gt=0)
    min_requests_per_step: int | None = Field(default=None, ge=1)
    min_shadow_pairs: int | None = Field(default=None, ge=2)
    no_data_action: Literal["hold", "rollback"] = "hold"
    golden_path: str | None = Field(default=None, description="golden jsonl file or folder")
    max_golden_items: int | None = Field(default=None, ge=1)
    embeddings: bool = Field(default=False, description="also compare answer embeddings (MiniLM)")
    gateway_url: str | None = Field(default=None, description="default: FLYWHEEL_GATEWAY__URL")
    actor: str = "release-flow"

    @field_validator("canary_steps")
    @classmethod
    def _percentages(cls, steps: list[int] | None) -> list[int] | None:
        if steps is not None and (not steps or any(not 0 < w <= 100 for w in steps)):
            raise ValueError("canary steps are percentages of traffic in (0, 100]")
        return steps


@dataclass
class ReleaseOutcome:
    version: str
    outcome: str  # promoted | rolled_back | held | rejected | stable | interrupted
    phase: str
    reasons: list[str]
    gate: dict[str, Any] | None = None
    report_keys: dict[str, str] = field(default_factory=dict)
    phases: list[dict[str, Any]] = field(default_factory=list)


NOTHING_TO_DO = {
    "stable": "{v} is already the stable version",
    "rejected": "{v} was rejected before; only a person may release it again (force)",
    "held": "the release of {v} is held for a person: resume, promote or abort it first",
}


@flow(name="release", log_prints=False)
def release(version: str, options: ReleaseOptions | None = None) -> ReleaseOutcome:
    """Release a candidate model version: the golden-set regression gate (paired t-test and
    Wilcoxon, bootstrap CI, slices, KL / diversity / length-bias checks; report in
    gates/<version>/), then shadow traffic scored with the stage-2 reward, then canary steps
    analysed from Prometheus, then promote. A failure rolls the candidate back (it is never
    released automatically again); an inconclusive result holds it for a person. Running it
    again for a release left in shadow or canary continues where it stopped."""
    logger = get_run_logger()
    rt = Runtime.from_env()
    opts = options or ReleaseOptions()
    cfg = rel.ReleaseConfig.from_settings(
        rt.settings.release,
        **opts.model_dump(include={"shadow_fraction", "canary_steps", "analysis_interval_s",
                                   "step_deadline_s", "min_requests_per_step",
                                   "min_shadow_pairs", "no_data_action"}),
    )  # fmt: skip
    gate_cfg = GateConfig.from_settings(rt.settings.release)
    out = ReleaseOutcome(version, "", "", [])
    with rt.reporting("release") as report:
        state = load_state(rt.store)
        plan = rel.plan_release(state, version, force=opts.force)
        if plan in NOTHING_TO_DO:
            return _finish(out, plan, state, [NOTHING_TO_DO[plan].format(v=version)], logger)
        entered = False  # whether this run already routed the first canary step
        if plan == "gate":
            state = _gate(rt, version, opts, cfg, gate_cfg, out)
            report.count("flywheel_gate_decisions_total", decision=str(out.gate["decision"]))  # type: ignore[index]
            entered = state.phase == "canary"
        if state.phase == "shadow" and state.candidate == version:
            result = watch_shadow_task(
                rt.store, version, source=rt.trace_source(), scorer=_scorer(rt),
                config=cfg, gate=gate_cfg, clock=Clock(),
            )  # fmt: skip
            state = _after(rt, version, "shadow", result, cfg, opts, out)
            entered = state.phase == "canary"
        if state.phase == "canary" and state.candidate == version:
            state = _canary(rt, version, state.step, cfg, opts, out, entered=entered)
    outcome = {"promoted": "promoted", "rolled_back": "rolled_back", "held": "held"}
    return _finish(out, outcome.get(state.phase, "interrupted"), state, out.reasons, logger)


def _gate(rt: Runtime, version: str, opts: ReleaseOptions, cfg: rel.ReleaseConfig,
          gate_cfg: GateConfig, out: ReleaseOutcome) -> RoutingState:  # fmt: skip
    from tasks.domain import load_golden

    state = rel.begin_release_task(
        rt.store, rt.catalog, version, actor=opts.actor, force=opts.force
    )
    baseline = opts.baseline or state.stable
    try:
        result = golden_gate_task(
            load_golden(opts.golden_path)[: opts.max_golden_items],
            baseline=open_answer_source(baseline, settings=rt.settings, store=rt.store),
            candidate=open_answer_source(version, settings=rt.settings, store=rt.store),
            scorer=_scorer(rt),
            config=gate_cfg,
            drift=DriftConfig.from_settings(rt.settings.release, embeddings=opts.embeddings),
            max_tokens=rt.settings.gateway.max_new_tokens,
        )
    except Exception as exc:  # the release must not stay "gating" with nobody running it
        with suppress(ReleaseError):
            rel.hold(rt.store, rt.catalog, version, actor=opts.actor, resume_to="gating",
                     reason=f"gate could not run: {type(exc).__name__}",
                     evidence={"error": repr(exc)[:500]})  # fmt: skip
        raise
    out.report_keys = write_report_task(rt.store, result)
    write_eval_results_task(rt.catalog, result)
    create_markdown_artifact(
        key=f"gate-{version.lower()}", markdown=report_markdown(result),
        description=f"release gate {version} vs {result.baseline}: {result.decision.value}",
    )  # fmt: skip
    out.gate = rel.gate_evidence(result, out.report_keys)
    out.reasons = list(result.reasons)
    try:
        return rel.apply_gate_task(rt.store, rt.catalog, result, report_keys=out.report_keys,
                                   config=cfg, actor=opts.actor, skip_shadow=opts.skip_shadow)  # fmt: skip
    except rel.ReleaseInterrupted as exc:  # aborted or rolled back while the gate ran
        return exc.state


def _canary(rt: Runtime, version: str, first_step: int, cfg: rel.ReleaseConfig,
            opts: ReleaseOptions, out: ReleaseOutcome, *, entered: bool) -> RoutingState:  # fmt: skip
    from infra.promql import open_canary_metrics

    metrics = open_canary_metrics(prometheus_url=rt.settings.release.prometheus_url,
                                  gateway_url=opts.gateway_url or rt.settings.gateway.url)  # fmt: skip
    stable = load_state(rt.store).stable
    canary_start = metrics.mark()  # the stable version's baseline window starts here
    evidence: dict[str, Any] = {}
    for step in range(first_step, len(cfg.canary_steps)):
        if step != first_step or not entered:
            try:
                rel.enter_canary_step_task(rt.store, rt.catalog, version, step=step, config=cfg,
                                           actor=opts.actor, evidence=evidence)  # fmt: skip
            except rel.ReleaseInterrupted as exc:  # rolled back or aborted between steps
                return exc.state
        result = watch_step_task(rt.store, version, stable=stable, metrics=metrics, config=cfg,
                                 canary_start=canary_start, clock=Clock())  # fmt: skip
        out.phases.append({"phase": "canary", "step": step, "weight": cfg.canary_steps[step],
                           "verdict": result.verdict, "reasons": result.reasons})  # fmt: skip
        if result.verdict != "pass":
            return _after(rt, version, "canary", result, cfg, opts, out, step=step)
        evidence = {"previous_step": {"step": step, "reasons": result.reasons, **result.evidence}}
    out.reasons = [f"canary passed {len(cfg.canary_steps)} steps"]
    try:
        return rel.promote_task(rt.store, rt.catalog, actor=opts.actor, evidence=evidence,
                                reason="canary passed every step", version=version)  # fmt: skip
    except rel.ReleaseInterrupted as exc:
        return exc.state


def _after(rt: Runtime, version: str, phase: Any, result: PhaseResult, cfg: rel.ReleaseConfig,
           opts: ReleaseOptions, out: ReleaseOutcome, step: int = 0) -> RoutingState:  # fmt: skip
    """Next state after a shadow phase or canary step: on to the canary, or concluded."""
    if phase == "shadow":
        out.phases.append({"phase": "shadow", "verdict": result.verdict, "reasons": result.reasons})
    out.reasons = list(result.reasons)
    if phase == "shadow" and result.verdict == "pass":
        evidence = {"shadow": {"reasons": result.reasons, **result.evidence}}
        try:
            return rel.enter_canary_step_task(rt.store, rt.catalog, version, step=0, config=cfg,
                                              actor=opts.actor, evidence=evidence)  # fmt: skip
        except rel.ReleaseInterrupted as exc:
            return exc.state
    return rel.conclude_task(rt.store, rt.catalog, version, phase=phase, result=result,
                             config=cfg, actor=opts.actor, step=step)  # fmt: skip


def _scorer(rt: Runtime) -> Any:
    from tasks.reward import Scorer

    return Scorer(rt.settings)


def _finish(out: ReleaseOutcome, outcome: str, state: RoutingState, reasons: list[str],
            logger: Any) -> ReleaseOutcome:  # fmt: skip
    out.outcome, out.phase, out.reasons = outcome, state.phase, reasons
    logger.info("release %s: %s (%s)", out.version, outcome, "; ".join(reasons))
    return out


Action = Literal["promote", "pause", "resume", "abort"]


@flow(name="release-control", log_prints=False)
def release_control(
    action: Action, reason: str = "manual", actor: str = "person"
) -> dict[str, Any]:
    """A person's decision on the current release: promote the candidate to stable, pause it
    where it is, resume a held release, or abort it (the candidate loses all traffic and is
    never released automatically again). Returns the routing state after."""
    rt = Runtime.from_env()
    fn = {"promote": rel.promote, "pause": rel.pause, "resume": rel.resume, "abort": rel.abort}
    fn[action](rt.store, rt.catalog, actor=actor, reason=reason)
    get_run_logger().info("release %s by %s: %s", action, actor, reason)
    return rel.release_status(rt.store)
