"""The release state machine (DESIGN): ``idle -> gating -> shadow -> canary(step i, weight w)
-> promoted``, and from any step ``-> rolled_back`` or ``-> held``.

State lives in ``deploy/state.json`` (:mod:`infra.gateway.state`, compare-and-swap on its
revision, so a release holding a stale copy never undoes a rollback the gateway wrote); every
transition is one ``release_transition`` audit event with its evidence (rollbacks: the
``rollback`` event of :func:`infra.gateway.state.rollback`). A rolled-back version is recorded
in ``state.rejected`` and is never released again unless a person forces it.

Human controls (plain functions; the CLI and the ``release-control`` flow call them):
:func:`release_status`, :func:`promote`, :func:`pause`, :func:`resume`, :func:`abort`.
``pause`` moves an active release to ``held`` (traffic unchanged) and records where to resume;
``resume`` moves it back. A running release flow waits while paused; a release that is no
longer running continues from its stored phase and step with ``flywheel release VERSION``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.errors import ReleaseError, TransientStoreError
from infra.gateway.state import (
    Phase,
    RoutingState,
    StateConflict,
    load_state,
    record_transition,
    rollback,
    save_state,
    write_audit,
)
from infra.retries import retry_on

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.settings import ReleaseSettings
    from infra.store import ObjectStore
    from tasks.gate import GateResult
    from tasks.rollout import PhaseResult

log = logging.getLogger(__name__)

ACTIVE: tuple[Phase, ...] = ("gating", "shadow", "canary")


class ReleaseInterrupted(ReleaseError):
    """The state moved under a running release (rolled back, aborted, paused, replaced)."""

    def __init__(self, message: str, state: RoutingState) -> None:
        super().__init__(message)
        self.state = state


class RejectedVersion(ReleaseError):
    """The version was rejected before; only a person may release it again (``force``)."""


@dataclass(frozen=True)
class ReleaseConfig:
    """Shadow and canary knobs (defaults from ``ReleaseSettings``). Floors as in the alert
    rules: the stable error ratio counts as at least 1 %, its p99 as at least 50 ms."""

    shadow_fraction: float = 0.2
    canary_steps: tuple[int, ...] = (5, 25, 50, 100)
    analysis_interval_s: float = 300.0
    step_deadline_s: float = 1800.0
    min_requests_per_step: int = 50
    min_shadow_pairs: int = 30
    error_ratio_max: float = 1.5
    latency_p99_ratio_max: float = 1.5
    feedback_ratio_min: float = 0.8
    min_feedback: int = 20
    error_floor: float = 0.01
    latency_floor_s: float = 0.05
    poll_s: float = 5.0
    pause_timeout_s: float = 1800.0
    no_data_action: str = "hold"  # "hold" (weight 0, held for a person) or "rollback"

    @classmethod
    def from_settings(cls, release: ReleaseSettings, **overrides: Any) -> ReleaseConfig:
        base: dict[str, Any] = {
            "shadow_fraction": release.shadow_fraction,
            "canary_steps": tuple(release.canary_steps),
            "analysis_interval_s": release.analysis_interval_s,
            "step_deadline_s": release.step_deadline_s,
            "min_requests_per_step": release.min_requests_per_step,
            "min_shadow_pairs": release.min_samples,
            "error_ratio_max": release.error_ratio_max,
            "latency_p99_ratio_max": release.latency_p99_ratio_max,
            "feedback_ratio_min": release.feedback_ratio_min,
            "pause_timeout_s": release.step_deadline_s,
        }
        base.update({k: v for k, v in overrides.items() if v is not None})
        base["canary_steps"] = tuple(base["canary_steps"])
        base["poll_s"] = min(base.get("poll_s", 5.0), max(0.05, base["analysis_interval_s"] / 4))
        return cls(**base)


# ---- transitions ----------------------------------------------------------------------------


def transition(
    store: ObjectStore,
    catalog: Catalog | None,
    version: str,
    *,
    to_phase: Phase,
    actor: str,
    reason: str,
    evidence: dict[str, Any] | None = None,
    expect: tuple[Phase, ...] | None = None,
    attempts: int = 5,
    **changes: Any,
) -> RoutingState:
    """Move ``version``'s release to ``to_phase`` with ``changes`` (compare-and-swap, retried on
    conflicts), then write its audit event. ``expect``: the phases the release must be in.

    Raises:
        ReleaseInterrupted: the release is not (any more) in an expected phase.
    """
    for attempt in range(attempts):
        state = load_state(store)
        if expect is not None and (state.candidate != version or state.phase not in expect):
            raise ReleaseInterrupted(
                f"release of {version} is not in {'/'.join(expect)} (phase {state.phase}, "
                f"candidate {state.candidate})",
                state,
            )
        new = record_transition(
            state, to_phase=to_phase, actor=actor, reason=reason, evidence=evidence, **changes
        )
        new.history[-1].candidate = version
        try:
            saved = save_state(store, new)
        except StateConflict:
            time.sleep(0.05 * (attempt + 1))
            continue
        if catalog is not None:
            details = {
                "from_phase": state.phase, "to_phase": to_phase, "reason": reason,
                "weight": saved.weight, "step": saved.step,
                "shadow_fraction": saved.shadow_fraction, "stable": saved.stable,
                "revision": saved.revision, "evidence": evidence or {},
            }  # fmt: skip
            write_audit(catalog, event_type="release_transition", actor=actor, subject=version,
                        details=details)  # fmt: skip
        log.info("release %s: %s -> %s (%s)", version, state.phase, to_phase, reason)
        return saved
    raise StateConflict(f"deploy/state.json kept changing; {version} -> {to_phase} not written")


def begin_release(
    store: ObjectStore, catalog: Catalog | None, version: str, *, actor: str, force: bool = False
) -> RoutingState:
    """Start gating ``version`` (candidate, no traffic yet).

    Raises:
        RejectedVersion: ``version`` was rejected and ``force`` is false.
        ReleaseError: it is already stable, or another candidate is being released or holds
            traffic (abort or promote that one first).
    """
    state = load_state(store)
    if version == state.stable:
        raise ReleaseError(f"{version} is already the stable version")
    if version in state.rejected and not force:
        raise RejectedVersion(f"{version} was rejected before; a person may force its release")
    other = state.candidate not in (None, version)
    if other and (state.phase in ACTIVE or state.weight > 0 or state.shadow_fraction > 0):
        raise ReleaseError(
            f"{state.candidate} is being released ({state.phase}, weight {state.weight:g}%); "
            "abort or promote it first"
        )
    evidence: dict[str, Any] = {"superseded": state.candidate} if other else {}
    if version in state.rejected:
        evidence["forced"] = f"{version} had been rejected"
    return transition(
        store, catalog, version, to_phase="gating", actor=actor,
        reason="release started: golden gate", evidence=evidence, candidate=version,
        weight=0.0, shadow_fraction=0.0, step=0,
        rejected=[v for v in state.rejected if v != version],
    )  # fmt: skip


def plan_release(state: RoutingState, version: str, *, force: bool = False) -> str:
    """Where a release of ``version`` starts: ``gate``, ``shadow``, ``canary`` (continue a
    release left in that phase), ``held`` (waiting for a person), ``stable`` or ``rejected``."""
    if version == state.stable:
        return "stable"
    if version in state.rejected and not force:
        return "rejected"
    if state.candidate == version and state.phase in ("shadow", "canary", "held"):
        return state.phase
    return "gate"


def hold(
    store: ObjectStore,
    catalog: Catalog | None,
    version: str,
    *,
    actor: str,
    reason: str,
    evidence: dict[str, Any],
    resume_to: Phase,
    step: int = 0,
    restore: dict[str, float] | None = None,
    **changes: Any,
) -> RoutingState:
    """Hold the release for a person; :func:`resume` continues at ``resume_to`` / ``step``
    and sets the routing in ``restore`` (``weight``, ``shadow_fraction``) again."""
    evidence = {**evidence, "resume_to": {"phase": resume_to, "step": step, **(restore or {})}}
    return transition(store, catalog, version, to_phase="held", actor=actor, reason=reason,
                      evidence=evidence, expect=ACTIVE, **changes)  # fmt: skip


def reject(
    store: ObjectStore, catalog: Catalog | None, *, actor: str, reason: str,
    evidence: dict[str, Any],
) -> RoutingState:  # fmt: skip
    """Take the candidate away (weight 0, shadow 0) and record it as rejected."""
    return rollback(store, reason=reason, actor=actor, evidence=evidence, catalog=catalog)


# ---- human controls -------------------------------------------------------------------------


def release_status(store: ObjectStore) -> dict[str, Any]:
    """The routing state in a few fields, with the last transition (for ``flywheel status``)."""
    state = load_state(store)
    last = state.history[-1] if state.history else None
    return {
        "stable": state.stable,
        "candidate": state.candidate,
        "phase": state.phase,
        "weight": state.weight,
        "step": state.step,
        "shadow_fraction": state.shadow_fraction,
        "rejected": list(state.rejected),
        "revision": state.revision,
        "updated_at": state.updated_at.isoformat() if state.updated_at else None,
        "last_transition": last.model_dump(mode="json") if last else None,
    }


def promote(
    store: ObjectStore,
    catalog: Catalog | None,
    *,
    actor: str,
    reason: str = "promoted by a person",
    evidence: dict[str, Any] | None = None,
    version: str | None = None,
) -> RoutingState:
    """Make the current candidate (which must be ``version`` when given) the stable version
    (all traffic), ending its release.

    Raises:
        ReleaseInterrupted: there is no candidate release (of ``version``) to promote.
    """
    state = load_state(store)
    current = state.candidate
    if current is None or state.phase not in (*ACTIVE, "held") or version not in (None, current):
        raise ReleaseInterrupted(
            f"no release of {version or 'a candidate'} to promote (phase {state.phase})", state
        )
    version = current
    return transition(
        store, catalog, version, to_phase="promoted", actor=actor, reason=reason,
        evidence=evidence, expect=(*ACTIVE, "held"), stable=version, candidate=None,
        weight=0.0, shadow_fraction=0.0, step=0,
    )  # fmt: skip


def pause(
    store: ObjectStore, catalog: Catalog | None, *, actor: str, reason: str = "paused"
) -> RoutingState:
    """Hold the release in shadow or canary where it is (its traffic unchanged) until
    :func:`resume`.

    Raises:
        ReleaseError: no release is in shadow or canary.
    """
    state = load_state(store)
    if state.candidate is None or state.phase not in ("shadow", "canary"):
        raise ReleaseError(f"no release in shadow or canary to pause (phase {state.phase})")
    return hold(store, catalog, state.candidate, actor=actor, reason=reason,
                evidence={"paused": True}, resume_to=state.phase, step=state.step)  # fmt: skip


def resume(
    store: ObjectStore, catalog: Catalog | None, *, actor: str, reason: str = "resumed"
) -> RoutingState:
    """Continue a held release (paused, or held by the gate or a step for a person's review)
    at the phase and step recorded when it was held.

    Raises:
        ReleaseError: no release is held.
    """
    state = load_state(store)
    if state.candidate is None or state.phase != "held":
        raise ReleaseError(f"no held release to resume (phase {state.phase})")
    held = next((t for t in reversed(state.history) if t.to_phase == "held"), None)
    target = (held.evidence.get("resume_to") if held else None) or {}
    phase: Phase = target.get("phase") or (held.from_phase if held else "shadow")
    if phase not in ACTIVE:
        phase = "shadow"
    routing: dict[str, Any] = {
        k: float(target[k]) for k in ("weight", "shadow_fraction") if k in target
    }
    return transition(store, catalog, state.candidate, to_phase=phase, actor=actor,
                      reason=reason, expect=("held",), step=int(target.get("step", 0)),
                      **routing)  # fmt: skip


def abort(
    store: ObjectStore, catalog: Catalog | None, *, actor: str, reason: str = "aborted"
) -> RoutingState:
    """Stop the release now: the candidate loses all traffic and is recorded as rejected
    (idempotent: nothing routed, nothing changed)."""
    return reject(store, catalog, actor=actor, reason=f"aborted: {reason}",
                  evidence={"action": "abort"})  # fmt: skip


# ---- phase transitions driven by evidence ---------------------------------------------------


def gate_evidence(result: GateResult, report_keys: dict[str, str]) -> dict[str, Any]:
    """The gate's numbers for the audit event and the state history (no answers)."""
    from tasks.gate_report import json_safe

    t = result.test
    return json_safe({
        "decision": result.decision.value, "baseline": result.baseline, "n": t.n,
        "mean_baseline": t.mean_baseline, "mean_candidate": t.mean_candidate,
        "mean_diff": t.mean_diff, "p_value": t.p_value, "wilcoxon_p": t.wilcoxon_p,
        "ci": [t.ci_low, t.ci_high], "effect_size": t.effect_size, "reasons": result.reasons,
        "regressed_slices": [s.name for s in result.slices if s.regressed],
        "failed_checks": {c.name: c.value for c in result.checks if c.status == "fail"},
        "run_id": result.run_id, "report": report_keys.get("json"),
    })  # fmt: skip


def enter_canary_step(
    store: ObjectStore, catalog: Catalog | None, version: str, *, step: int,
    config: ReleaseConfig, actor: str, evidence: dict[str, Any] | None = None,
) -> RoutingState:  # fmt: skip
    """Route ``canary_steps[step]`` % of users to the candidate (shadow mirroring off)."""
    weight = float(config.canary_steps[step])
    return transition(
        store, catalog, version, to_phase="canary", actor=actor,
        reason=f"canary step {step + 1}/{len(config.canary_steps)}: {weight:g}% of traffic",
        evidence=evidence, expect=ACTIVE, step=step, weight=weight, shadow_fraction=0.0,
    )  # fmt: skip


def apply_gate(
    store: ObjectStore, catalog: Catalog | None, result: GateResult, *, report_keys: dict[str, str],
    config: ReleaseConfig, actor: str, skip_shadow: bool = False,
) -> RoutingState:  # fmt: skip
    """PROCEED_TO_SHADOW -> shadow (or the first canary step), ROLLBACK -> rolled_back and
    rejected, MANUAL_REVIEW -> held until a person resumes (or aborts) it."""
    from tasks.gate import Decision

    version, evidence = result.version, {"gate": gate_evidence(result, report_keys)}
    first = result.reasons[0] if result.reasons else ""
    direct = skip_shadow or config.shadow_fraction <= 0
    if result.decision == Decision.PROCEED and direct:
        return enter_canary_step(store, catalog, version, step=0, config=config, actor=actor,
                                 evidence=evidence)  # fmt: skip
    if result.decision == Decision.PROCEED:
        return transition(
            store, catalog, version, to_phase="shadow", actor=actor, expect=("gating",),
            reason=f"gate passed ({first}); shadowing {config.shadow_fraction:.0%} of traffic",
            evidence=evidence, shadow_fraction=config.shadow_fraction, weight=0.0,
        )  # fmt: skip
    if result.decision == Decision.ROLLBACK:
        return reject(store, catalog, actor=actor, evidence=evidence,
                      reason=f"gate rejected {version}: {first}")  # fmt: skip
    restore = ({"weight": float(config.canary_steps[0])} if direct
               else {"shadow_fraction": config.shadow_fraction})  # fmt: skip
    return hold(store, catalog, version, actor=actor, reason=f"gate: manual review ({first})",
                evidence=evidence, resume_to="canary" if direct else "shadow",
                restore=restore)  # fmt: skip


def conclude(
    store: ObjectStore, catalog: Catalog | None, version: str, *, phase: Phase,
    result: PhaseResult, config: ReleaseConfig, actor: str, step: int = 0,
) -> RoutingState:  # fmt: skip
    """End a shadow phase or canary step that did not pass: ``fail`` rolls back (rejected);
    ``no_data`` holds with no traffic (or rolls back, ``no_data_action``); ``paused`` and
    ``interrupted`` leave the state as a person or the gateway set it."""
    evidence: dict[str, Any] = {
        str(phase): {"verdict": result.verdict, "reasons": result.reasons, **result.evidence}
    }
    where = f"{phase} step {step + 1}" if phase == "canary" else phase
    why = "; ".join(result.reasons)
    try:
        if result.verdict == "fail" or (
            result.verdict == "no_data" and config.no_data_action == "rollback"
        ):
            return reject(store, catalog, actor=actor, evidence=evidence,
                          reason=f"{where} failed ({result.verdict}): {why}")  # fmt: skip
        if result.verdict == "no_data":
            restore = ({"weight": float(config.canary_steps[step])} if phase == "canary"
                       else {"shadow_fraction": config.shadow_fraction})  # fmt: skip
            return hold(store, catalog, version, actor=actor, evidence=evidence,
                        reason=f"{where} has no verdict (no data): {why}", resume_to=phase,
                        step=step, restore=restore, weight=0.0, shadow_fraction=0.0)  # fmt: skip
    except ReleaseInterrupted as exc:
        return exc.state
    return load_state(store)


_retry: dict[str, Any] = {
    "retries": 3,
    "retry_delay_seconds": [2, 5, 15],
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": retry_on(TransientStoreError),
    "cache_policy": NO_CACHE,
}
begin_release_task = task(**_retry)(begin_release)
apply_gate_task = task(**_retry)(apply_gate)
enter_canary_step_task = task(**_retry)(enter_canary_step)
conclude_task = task(**_retry)(conclude)
promote_task = task(**_retry)(promote)
