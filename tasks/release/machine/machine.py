"""The release state machine (docs/stages/release.md): ``idle -> gating -> shadow ->
canary(step i, weight w) -> promoted``, and from any step ``-> rolled_back`` or ``-> held``.

The release flow asks :func:`next_step` what to do (gate, shadow, or canary step ``i``), does
it, and hands the verdict to :func:`apply_gate`, :func:`after_shadow` or
:func:`after_canary_step`, which make the transition the verdict calls for and return the
state. No exception carries control: when the release left the expected phase meanwhile (a
rollback, an abort, a pause), the transition is not made and the state found is returned, so
:func:`next_step` ends the run.

State changes go through :mod:`infra.routing` only (compare-and-swap on the revision, so a
stale release never undoes a rollback); every transition is one ``release_transition`` audit
event with its evidence (rollbacks: the ``rollback`` event the routing backend writes). A
rolled-back version is recorded in ``state.rejected`` and is never released again unless a
person forces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from prefect import task

from infra.task_retries import IO_RETRIES
from tasks.release.machine.transitions import (
    Edge,
    Resume,
    begin_release,
    canary_move,
    hold,
    promotion,
    reject,
    try_transition,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.routing import Phase, RoutingBackend, RoutingState
    from infra.settings import ReleaseSettings
    from tasks.release.canary.rollout import PhaseResult
    from tasks.release.gate.gate import GateResult


@dataclass(frozen=True)
class Step:
    """What the release flow does next: run the gate, watch the shadow phase, or watch canary
    step ``index`` (its routing is already set)."""

    kind: Literal["gate", "shadow", "canary"]
    index: int = 0


def plan_release(state: RoutingState, version: str, *, force: bool = False) -> str:
    """Where a release of ``version`` starts: ``gate``, ``shadow``, ``canary`` (continue a
    release left in that phase), ``held`` (waiting for a person), ``stable``, ``rejected`` or
    ``retired`` (trained on erased data: never released again)."""
    if version == state.stable:
        return "stable"
    if version in state.retired:
        return "retired"
    if version in state.rejected and not force:
        return "rejected"
    if state.candidate == version and state.phase in ("shadow", "canary", "held"):
        return state.phase
    return "gate"


def next_step(
    state: RoutingState, version: str, *, last: str | None, force: bool = False
) -> Step | None:
    """The next step of ``version``'s release in ``state``; None when the run is over
    (promoted, rolled back, held for a person, taken over by another version, or handed over
    to another run). ``last``: the verdict of the step this run did last (None before its
    first step: only a new run starts with the gate)."""
    if last is None and plan_release(state, version, force=force) == "gate":
        return Step("gate")
    if last in ("interrupted", "paused") or state.candidate != version:
        return None
    if state.phase == "shadow":
        return Step("shadow")
    if state.phase == "canary":
        return Step("canary", index=state.step)
    return None


def apply_gate(
    routing: RoutingBackend,
    catalog: Catalog | None,
    result: GateResult,
    *,
    gate: dict[str, Any],
    policy: ReleaseSettings,
    actor: str,
    skip_shadow: bool = False,
    release_id: str | None = None,
) -> RoutingState:
    """PROCEED_TO_SHADOW -> shadow (or the first canary step), ROLLBACK -> rolled_back and
    rejected, MANUAL_REVIEW -> held until a person resumes (or aborts) it; each only while
    ``result.version``'s release (``release_id`` when given) is current. ``gate``: the gate's
    evidence (:func:`tasks.release.gate.report.gate_evidence`), recorded with the transition."""
    from tasks.release.gate.gate import Decision

    version, evidence = result.version, {"gate": gate}
    first = result.reasons[0] if result.reasons else ""
    direct = skip_shadow or policy.shadow_fraction <= 0
    ours: dict[str, Any] = {"release_id": release_id, "evidence": evidence, "actor": actor}
    if result.decision == Decision.ROLLBACK:
        why = f"gate rejected {version}: {first}"
        return reject(routing, catalog, version, reason=why, **ours)
    if result.decision == Decision.PROCEED and direct:
        moved = canary_move(routing, catalog, version, step=0, policy=policy, **ours)
    elif result.decision == Decision.PROCEED:
        moved = try_transition(
            routing,
            catalog,
            version,
            edge=Edge("shadow", ("gating",)),
            reason=f"gate passed ({first}); shadowing {policy.shadow_fraction:.0%} of traffic",
            **ours,
            shadow_fraction=policy.shadow_fraction,
            weight=0.0,
        )
    else:
        restore = (
            {"weight": policy.canary_weight(0)}
            if direct
            else {"shadow_fraction": policy.shadow_fraction}
        )
        moved = hold(
            routing,
            catalog,
            version,
            reason=f"gate: manual review ({first})",
            **ours,
            resume=Resume(phase="canary" if direct else "shadow", restore=restore),
        )
    return moved.state


def after_shadow(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    result: PhaseResult,
    policy: ReleaseSettings,
    actor: str,
    release_id: str | None = None,
) -> RoutingState:
    """A passed shadow phase enters the first canary step; anything else is concluded."""
    ours: dict[str, Any] = {"policy": policy, "actor": actor, "release_id": release_id}
    if result.verdict != "pass":
        return conclude(routing, catalog, version, at=Step("shadow"), result=result, **ours)
    evidence = {"shadow": {"reasons": result.reasons, **result.evidence}}
    return canary_move(routing, catalog, version, step=0, evidence=evidence, **ours).state


def after_canary_step(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    step: int,
    result: PhaseResult,
    policy: ReleaseSettings,
    actor: str,
    release_id: str | None = None,
) -> RoutingState:
    """A passed step enters the next one, or promotes after the last; anything else is
    concluded (rolled back, held, or left as a person or the gateway set it)."""
    ours: dict[str, Any] = {"actor": actor, "release_id": release_id}
    if result.verdict != "pass":
        return conclude(
            routing,
            catalog,
            version,
            at=Step("canary", index=step),
            result=result,
            policy=policy,
            **ours,
        )
    evidence = {"previous_step": {"step": step, "reasons": result.reasons, **result.evidence}}
    if step + 1 < len(policy.canary_steps):
        moved = canary_move(
            routing, catalog, version, step=step + 1, policy=policy, evidence=evidence, **ours
        )
    else:
        why = "canary passed every step"
        moved = promotion(routing, catalog, version, reason=why, evidence=evidence, **ours)
    return moved.state


def conclude(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    at: Step,
    result: PhaseResult,
    policy: ReleaseSettings,
    actor: str,
    release_id: str | None = None,
) -> RoutingState:
    """End the shadow phase or canary step ``at`` that did not pass: ``fail`` rolls back
    (rejected); ``no_data`` holds with no traffic (or rolls back, ``no_data_action``);
    ``paused`` and ``interrupted`` leave the state as a person or the gateway set it. A verdict
    about a release that is no longer current (a stale run) changes nothing and is audited.

    Raises:
        ValueError: ``at`` is the gate (:func:`apply_gate` ends it).
    """
    kind, step = at.kind, at.index
    if kind == "gate":
        raise ValueError("the gate is concluded by apply_gate")
    phase: Phase = kind
    evidence: dict[str, Any] = {
        str(phase): {"verdict": result.verdict, "reasons": result.reasons, **result.evidence}
    }
    where = f"{phase} step {step + 1}" if phase == "canary" else phase
    why = "; ".join(result.reasons)
    rollback = result.verdict == "fail" or (
        result.verdict == "no_data" and policy.no_data_action == "rollback"
    )
    if rollback:
        reason = f"{where} failed ({result.verdict}): {why}"
        return reject(
            routing,
            catalog,
            version,
            actor=actor,
            evidence=evidence,
            reason=reason,
            release_id=release_id,
        )
    if result.verdict == "no_data":
        restore = (
            {"weight": policy.canary_weight(step)}
            if phase == "canary"
            else {"shadow_fraction": policy.shadow_fraction}
        )
        return hold(
            routing,
            catalog,
            version,
            actor=actor,
            evidence=evidence,
            reason=f"{where} has no verdict (no data): {why}",
            resume=Resume(phase=phase, step=step, restore=restore),
            release_id=release_id,
            weight=0.0,
            shadow_fraction=0.0,
        ).state
    return routing.load()


begin_release_task = task(**IO_RETRIES)(begin_release)
hold_task = task(**IO_RETRIES)(hold)
apply_gate_task = task(**IO_RETRIES)(apply_gate)
after_shadow_task = task(**IO_RETRIES)(after_shadow)
after_canary_step_task = task(**IO_RETRIES)(after_canary_step)
