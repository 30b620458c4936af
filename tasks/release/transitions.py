"""The transitions of the release state machine: each one a guarded compare-and-swap through
:mod:`infra.routing` and one ``release_transition`` audit event with its evidence (rollbacks:
the ``rollback`` event the routing backend writes).

A guarded transition that finds the release no longer in an expected phase (rolled back,
aborted, paused meanwhile) is not made and returns the state found (:class:`Moved`);
:meth:`Moved.or_raise` is for callers that need it made (a person's control).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.errors import (
    RejectedVersion,
    ReleaseError,
    ReleaseInterrupted,
    StateConflict,
    UnservableVersion,
)
from infra.routing import Phase, RoutingBackend, RoutingState, StateChange

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.models import ServableVersions
    from infra.settings import ReleaseSettings

log = logging.getLogger(__name__)

ACTIVE: tuple[Phase, ...] = ("gating", "shadow", "canary")


@dataclass(frozen=True, kw_only=True)
class Moved:
    """A guarded transition: the state after it, or the state found when the release was no
    longer in an expected phase (``moved`` False, ``why`` says where it was)."""

    state: RoutingState
    moved: bool
    why: str = ""

    def or_raise(self) -> RoutingState:
        """The new state.

        Raises:
            ReleaseInterrupted: the transition was not made.
        """
        if not self.moved:
            raise ReleaseInterrupted(self.why, self.state)
        return self.state


def try_transition(
    routing: RoutingBackend,
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
) -> Moved:
    """Move ``version``'s release to ``to_phase`` with ``changes`` (compare-and-swap, retried on
    conflicts), then write its audit event; not moved when the release is not in ``expect``.

    Raises:
        StateConflict: the state kept changing for ``attempts`` tries (transient).
    """
    for attempt in range(attempts):
        state = routing.load()
        if expect is not None and (state.candidate != version or state.phase not in expect):
            why = (
                f"release of {version} is not in {'/'.join(expect)} (phase {state.phase}, "
                f"candidate {state.candidate})"
            )
            return Moved(state=state, moved=False, why=why)
        change = StateChange(
            phase=to_phase,
            subject=version,
            actor=actor,
            reason=reason,
            evidence=evidence or {},
            expected_revision=state.revision,
            **changes,
        )
        saved = _commit(routing, catalog, change, before=state, version=version)
        if saved is None:
            time.sleep(0.02 * (attempt + 1))
            continue
        log.info("release %s: %s -> %s (%s)", version, state.phase, to_phase, reason)
        return Moved(state=saved, moved=True)
    raise StateConflict(f"the routing state kept changing; {version} -> {to_phase} not written")


def _commit(
    routing: RoutingBackend,
    catalog: Catalog | None,
    change: StateChange,
    *,
    before: RoutingState,
    version: str,
) -> RoutingState | None:
    """Write ``change`` (a compare-and-swap on ``before``'s revision) and its audit event;
    None when the state changed since ``before`` was read (reload and decide again)."""
    try:
        saved = routing.transition(change)
    except StateConflict:
        return None
    if catalog is not None:
        _audit(catalog, saved, before=before, version=version, evidence=change.evidence)
    return saved


def transition(
    routing: RoutingBackend, catalog: Catalog | None, version: str, **kwargs: Any
) -> RoutingState:
    """:func:`try_transition` for a caller that needs the move made.

    Raises:
        ReleaseInterrupted: the release is not (any more) in an expected phase.
    """
    return try_transition(routing, catalog, version, **kwargs).or_raise()


def _audit(
    catalog: Catalog,
    saved: RoutingState,
    *,
    before: RoutingState,
    version: str,
    evidence: dict[str, Any] | None,
) -> None:
    from infra.audit import record_event

    last = saved.history[-1]
    details = {
        "from_phase": before.phase,
        "to_phase": saved.phase,
        "reason": last.reason,
        "weight": saved.weight,
        "step": saved.step,
        "shadow_fraction": saved.shadow_fraction,
        "stable": saved.stable,
        "revision": saved.revision,
        "evidence": evidence or {},
    }
    record_event(
        catalog,
        event_type="release_transition",
        actor=last.actor,
        subject=version,
        details=details,
        best_effort=True,
    )


def begin_release(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    actor: str,
    force: bool = False,
) -> RoutingState:
    """Start gating ``version`` (candidate, no traffic yet).

    Raises:
        RejectedVersion: ``version`` was rejected and ``force`` is false.
        ReleaseError: it is already stable, or another candidate is being released or holds
            traffic (abort or promote that one first).
    """
    state = routing.load()
    if version == state.stable:
        raise ReleaseError(f"{version} is already the stable version")
    if version in state.retired:  # never, not even forced: it trained on erased data
        raise RejectedVersion(f"{version} is retired after an erasure; it is never released")
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
        routing,
        catalog,
        version,
        to_phase="gating",
        actor=actor,
        reason="release started: golden gate",
        evidence=evidence,
        candidate=version,
        weight=0.0,
        shadow_fraction=0.0,
        step=0,
        rejected=[v for v in state.rejected if v != version],
    )


def hold(
    routing: RoutingBackend,
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
) -> Moved:
    """Hold the release for a person; resuming continues at ``resume_to`` / ``step`` and sets
    the routing in ``restore`` (``weight``, ``shadow_fraction``) again."""
    evidence = {**evidence, "resume_to": {"phase": resume_to, "step": step, **(restore or {})}}
    return try_transition(
        routing,
        catalog,
        version,
        to_phase="held",
        actor=actor,
        reason=reason,
        evidence=evidence,
        expect=ACTIVE,
        **changes,
    )


def reject(
    routing: RoutingBackend, *, actor: str, reason: str, evidence: dict[str, Any]
) -> RoutingState:
    """Take the candidate away (weight 0, shadow 0) and record it as rejected."""
    return routing.rollback(reason=reason, actor=actor, evidence=evidence)[1]


def promotion(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    actor: str,
    reason: str,
    evidence: dict[str, Any] | None = None,
) -> Moved:
    """Make ``version`` (the candidate, in an active or held release) the stable version; the
    stable version it replaces is kept in the evidence (``previous_stable``: where a rollback
    returns to if ``version`` ever cannot be served)."""
    previous = routing.load().stable
    return try_transition(
        routing,
        catalog,
        version,
        to_phase="promoted",
        actor=actor,
        reason=reason,
        evidence={**(evidence or {}), "previous_stable": previous},
        expect=(*ACTIVE, "held"),
        stable=version,
        candidate=None,
        weight=0.0,
        shadow_fraction=0.0,
        step=0,
    )


def canary_move(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    step: int,
    policy: ReleaseSettings,
    actor: str,
    evidence: dict[str, Any] | None = None,
) -> Moved:
    weight = float(policy.canary_steps[step])
    return try_transition(
        routing,
        catalog,
        version,
        to_phase="canary",
        actor=actor,
        reason=f"canary step {step + 1}/{len(policy.canary_steps)}: {weight:g}% of traffic",
        evidence=evidence,
        expect=ACTIVE,
        step=step,
        weight=weight,
        shadow_fraction=0.0,
    )


def enter_canary_step(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    step: int,
    policy: ReleaseSettings,
    actor: str,
    evidence: dict[str, Any] | None = None,
) -> RoutingState:
    """Route ``canary_steps[step]`` % of users to the candidate (shadow mirroring off).

    Raises:
        ReleaseInterrupted: the release is no longer active (rolled back, aborted, held).
    """
    return canary_move(
        routing, catalog, version, step=step, policy=policy, actor=actor, evidence=evidence
    ).or_raise()


def earlier_stables(state: RoutingState) -> list[str]:
    """The versions that were stable before the current one, newest first: each promotion's
    version and the stable it replaced, then ``v0`` (every routing state starts with it)."""
    seen: list[str] = []
    for t in reversed(state.history):
        if t.to_phase == "promoted":
            seen += [v for v in (t.candidate, t.evidence.get("previous_stable")) if v]
    seen.append(RoutingState().stable)
    return [v for v in dict.fromkeys(seen) if v != state.stable]


def restore_servable_stable(
    routing: RoutingBackend,
    catalog: Catalog | None,
    *,
    versions: ServableVersions,
    actor: str,
    reason: str,
    attempts: int = 5,
) -> tuple[RoutingState, str | None]:
    """When the stable version cannot be served (every user request would fail), make the
    newest earlier stable version that can be served, and was not rejected, the stable one
    again. Returns the state and the version restored (None: the stable one is servable).

    Raises:
        UnservableVersion: neither the stable version nor any earlier one can be served.
        StateConflict: the state kept changing for ``attempts`` tries (transient).
    """
    for attempt in range(attempts):
        state = routing.load()
        bad = state.stable
        if versions.servable(bad):
            return state, None
        ok = [v for v in earlier_stables(state) if v not in {*state.rejected, *state.retired}]
        target = next((v for v in ok if versions.servable(v)), None)
        if target is None:
            raise UnservableVersion(
                f"the stable version {bad} cannot be served and no earlier stable version can "
                f"(tried {', '.join(ok) or 'none'}); release a servable version "
                f"(versions: {', '.join(versions.known()) or 'none'})"
            )
        change = StateChange(
            stable=target,
            phase="rolled_back",
            subject=target,
            actor=actor,
            reason=f"stable {bad} cannot be served; {target} restored ({reason})",
            evidence={"unservable_stable": bad, "restored_stable": target},
            expected_revision=state.revision,
        )
        saved = _commit(routing, catalog, change, before=state, version=target)
        if saved is None:
            time.sleep(0.02 * (attempt + 1))
            continue
        log.info("stable %s cannot be served: %s restored as stable", bad, target)
        return saved, target
    raise StateConflict("the routing state kept changing; the stable version was not restored")
