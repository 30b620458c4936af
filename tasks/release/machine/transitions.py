"""The transitions of the release state machine: each one a guarded compare-and-swap through
:mod:`infra.routing` and one ``release_transition`` audit event with its evidence (rollbacks:
the ``rollback`` event the routing backend writes).

Every transition names the release it is about (the version, and its ``release_id`` when the
caller knows it). A guarded transition that finds the release no longer in an expected phase
(rolled back, aborted, paused meanwhile), or another release current, is not made and returns
the state found (:class:`Moved`); a decision about another release is also audited as a
``stale_decision``. :meth:`Moved.or_raise` is for callers that need it made (a person's
control).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.errors import RejectedVersion, ReleaseError, ReleaseInterrupted
from infra.routing import (
    Phase,
    RoutingBackend,
    RoutingState,
    StateChange,
    compare_and_swap,
    new_release_id,
    record_decision,
    record_stale,
    stale_reason,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyiceberg.catalog import Catalog

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


@dataclass(frozen=True)
class Edge:
    """An edge of the state machine: into phase ``to`` from a release in one of ``expect``
    (None: from whatever phase it is in)."""

    to: Phase
    expect: tuple[Phase, ...] | None = None


def try_transition(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    edge: Edge,
    actor: str,
    reason: str,
    evidence: dict[str, Any] | None = None,
    release_id: str | None = None,
    **changes: Any,
) -> Moved:
    """Move ``version``'s release (``release_id`` when given) along ``edge`` with ``changes``
    (compare-and-swap, retried on conflicts), then write its audit event; not moved when the
    release is not in ``edge.expect`` or another release is current.

    Raises:
        StateConflict: the state kept changing (transient).
    """
    expect = edge.expect

    def decide(state: RoutingState) -> StateChange | None:
        if _refusal(state, version, expect=expect, release_id=release_id):
            return None
        return StateChange(
            phase=edge.to,
            subject=version,
            actor=actor,
            reason=reason,
            evidence=evidence or {},
            expected_revision=state.revision,
            **changes,
        )

    before, saved = _swap(routing, catalog, version, decide)
    if saved is None:
        why = _refusal(before, version, expect=expect, release_id=release_id) or ""
        if _stale(before, version, expect=expect, release_id=release_id):
            record_stale(
                catalog,
                before,
                actor=actor,
                version=version,
                release_id=release_id,
                asked=edge.to,
                why=why,
            )
        return Moved(state=before, moved=False, why=why)
    return Moved(state=saved, moved=True)


def _swap(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    decide: Callable[[RoutingState], StateChange | None],
) -> tuple[RoutingState, RoutingState | None]:
    """``(state read, state written or None)``: one compare-and-swap of the change ``decide``
    makes from the state it writes over, audited (``release_transition``) and logged.

    Raises:
        StateConflict: the state kept changing (transient).
    """
    before, saved = compare_and_swap(
        routing.load,
        decide,
        lambda _, change: routing.transition(change),
        operation="routing.transition",
    )
    if saved is None:
        return before, None
    if catalog is not None:
        record_decision(
            catalog, saved, before=before, event_type="release_transition", subject=version
        )
    why = saved.history[-1].reason  # every transition appends its entry
    log.info("release %s: %s -> %s (%s)", version, before.phase, saved.phase, why)
    return before, saved


def _stale(
    state: RoutingState,
    version: str,
    *,
    expect: tuple[Phase, ...] | None,
    release_id: str | None,
) -> str | None:
    """Why ``state`` is another release than the one a guarded transition (``expect``) or a
    named release (``release_id``) is about; None for the start of a release."""
    if expect is None and release_id is None:
        return None
    return stale_reason(state, version=version, release_id=release_id)


def _refusal(
    state: RoutingState,
    version: str,
    *,
    expect: tuple[Phase, ...] | None,
    release_id: str | None,
) -> str | None:
    """Why ``version``'s transition must not be made on ``state`` (None: it may)."""
    if why := _stale(state, version, expect=expect, release_id=release_id):
        return why
    if expect is not None and (state.candidate != version or state.phase not in expect):
        return (
            f"release of {version} is not in {'/'.join(expect)} (phase {state.phase}, "
            f"candidate {state.candidate})"
        )
    return None


def transition(
    routing: RoutingBackend, catalog: Catalog | None, version: str, **kwargs: Any
) -> RoutingState:
    """:func:`try_transition` for a caller that needs the move made.

    Raises:
        ReleaseInterrupted: the release is not (any more) in an expected phase.
    """
    return try_transition(routing, catalog, version, **kwargs).or_raise()


def begin_release(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    actor: str,
    force: bool = False,
) -> RoutingState:
    """Start gating ``version`` (candidate, no traffic yet), decided on the state the start
    writes over: a release begun or a version rejected since the read makes the write
    conflict, and the start is decided again on the new state (two never both start).

    Raises:
        RejectedVersion: ``version`` was rejected and ``force`` is false.
        ReleaseError: it is already stable, or another candidate is being released or holds
            traffic (abort or promote that one first).
        StateConflict: the state kept changing (transient).
    """
    release_id = new_release_id(version)

    def decide(state: RoutingState) -> StateChange:
        return _start(state, version, actor=actor, force=force, release_id=release_id)

    saved = _swap(routing, catalog, version, decide)[1]
    assert saved is not None  # decide starts the release or raises; it never declines
    return saved


def _start(
    state: RoutingState, version: str, *, actor: str, force: bool, release_id: str
) -> StateChange:
    """The change that starts ``version``'s release ``release_id`` on ``state`` (raises as
    :func:`begin_release` when it may not start)."""
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
    return StateChange(
        phase="gating",
        subject=version,
        actor=actor,
        reason="release started: golden gate",
        evidence=evidence,
        expected_revision=state.revision,
        candidate=version,
        weight=0.0,
        shadow_fraction=0.0,
        step=0,
        rejected=[v for v in state.rejected if v != version],
        release_id=release_id,
    )


@dataclass(frozen=True, kw_only=True)
class Resume:
    """Where a held release continues when a person resumes it: ``phase`` (canary: at
    ``step``), with the routing in ``restore`` (``weight``, ``shadow_fraction``) set again."""

    phase: Phase
    step: int = 0
    restore: Mapping[str, float] | None = None


def hold(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    actor: str,
    reason: str,
    evidence: dict[str, Any],
    resume: Resume,
    **changes: Any,
) -> Moved:
    """Hold the release for a person; resuming continues where ``resume`` says."""
    resume_to = {"phase": resume.phase, "step": resume.step, **(resume.restore or {})}
    evidence = {**evidence, "resume_to": resume_to}
    return try_transition(
        routing,
        catalog,
        version,
        edge=Edge("held", ACTIVE),
        actor=actor,
        reason=reason,
        evidence=evidence,
        **changes,
    )


def reject(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    actor: str,
    reason: str,
    evidence: dict[str, Any],
    release_id: str | None = None,
) -> RoutingState:
    """Take ``version``'s release (``release_id`` when given) away: the candidate loses its
    traffic (weight 0, shadow 0) and is recorded as rejected. When another release is current
    nothing changes: the stale decision is logged and audited, and the state found returned."""
    try:
        return routing.rollback(
            reason=reason,
            actor=actor,
            evidence=evidence,
            version=version,
            release_id=release_id,
            candidate_only=True,
        )[1]
    except ReleaseInterrupted as exc:
        record_stale(
            catalog,
            exc.state,
            actor=actor,
            version=version,
            release_id=release_id,
            asked="rolled_back",
            why=str(exc),
        )
        return exc.state  # type: ignore[no-any-return]


def promotion(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    actor: str,
    reason: str,
    evidence: dict[str, Any] | None = None,
    release_id: str | None = None,
) -> Moved:
    """Make ``version`` (the candidate, in an active or held release) the stable version; the
    stable version it replaces is kept in the evidence (``previous_stable``: where a rollback
    returns to if ``version`` ever cannot be served)."""
    previous = routing.load().stable
    return try_transition(
        routing,
        catalog,
        version,
        edge=Edge("promoted", (*ACTIVE, "held")),
        actor=actor,
        reason=reason,
        evidence={**(evidence or {}), "previous_stable": previous},
        release_id=release_id,
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
    release_id: str | None = None,
) -> Moved:
    """Route ``canary_weight(step)`` % of users to the candidate (not moved when its release
    is no longer active)."""
    weight = policy.canary_weight(step)
    return try_transition(
        routing,
        catalog,
        version,
        edge=Edge("canary", ACTIVE),
        actor=actor,
        reason=f"canary step {step + 1}/{len(policy.canary_steps)}: {weight:g}% of traffic",
        evidence=evidence,
        release_id=release_id,
        step=step,
        weight=weight,
        shadow_fraction=0.0,
    )
