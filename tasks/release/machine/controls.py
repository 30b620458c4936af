"""A person's controls over the current release (the CLI and the ``release-control`` flow call
them): :func:`release_status`, :func:`promote`, :func:`pause`, :func:`resume`, :func:`abort`,
and :func:`roll_back` (the ``rollback`` flow's, which an alert starts too).

``pause`` moves an active release to ``held`` (traffic unchanged) and records where to resume;
``resume`` moves it back. The ``release-control`` flow then continues the release itself
(``handover``); a release flow still waiting on the pause steps aside.

Every control checks before it changes anything: ``promote`` refuses a candidate that cannot be
served, and one that has not passed the golden gate in its current release unless a person
forces it with a reason (recorded with the promotion in the audit log).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.errors import ControlRefused, ReleaseInterrupted
from infra.routing import bake_target, record_stale
from tasks.release.machine.transitions import (
    ACTIVE,
    Edge,
    Resume,
    hold,
    promotion,
    reject,
    transition,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.routing import Phase, RoutingBackend, RoutingState
    from infra.serving.models import ServableVersions

PROCEED = "PROCEED_TO_SHADOW"  # tasks.release.gate.gate.Decision.PROCEED (not imported: heavy)


def retired_refusal(state: RoutingState, version: str | None) -> str | None:
    """Why ``version`` may never be released, promoted or routed again (it trained on the data
    of a user who was forgotten), or None."""
    if version is None or version not in state.retired:
        return None
    return (
        f"{version} is retired: it trained on data erased by forget-user and can never be "
        "released, promoted or routed again (flywheel erasure-status RECEIPT shows why)"
    )


def release_status(routing: RoutingBackend, *, bake_s: float = 0.0) -> dict[str, Any]:
    """The routing state in a few fields, with the last transition (for ``flywheel status``);
    ``rollback_to``: the previous stable version ``flywheel rollback`` returns to while the
    promotion is baking (``bake_s``), else None; ``workloads``: each workload's release
    (:func:`workload_rows`). The other fields are the shared release's (or, through a
    workload's routing, that workload's)."""
    state = routing.load()
    last = state.history[-1] if state.history else None
    return {
        "stable": state.stable,
        "candidate": state.candidate,
        "release_id": state.release_id,
        "phase": state.phase,
        "weight": state.weight,
        "step": state.step,
        "shadow_fraction": state.shadow_fraction,
        "rejected": list(state.rejected),
        "retired": list(state.retired),
        "rollback_to": bake_target(state, bake_s=bake_s),
        "revision": state.revision,
        "updated_at": state.updated_at.isoformat() if state.updated_at else None,
        "last_transition": last.model_dump(mode="json") if last else None,
        "workloads": workload_rows(state),
    }


def workload_rows(state: RoutingState) -> list[dict[str, Any]]:
    """Each workload's release in a few fields, the shared one first (``workload`` None), then
    every workload with a release of its own by name (of a workload's view: its row alone)."""
    names: list[str | None] = [None, *sorted(state.workloads)]
    rows = []
    for name in names if state.workload is None else [state.workload]:  # a view: its own
        view = state.release_of(name)
        rows.append(
            {
                "workload": name,
                "stable": view.stable,
                "candidate": view.candidate,
                "phase": view.phase,
                "weight": view.weight,
                "release_id": view.release_id,
            }
        )
    return rows


def gate_decision(state: RoutingState, version: str) -> str | None:
    """The golden gate's decision in ``version``'s current release (the transitions since it
    last entered ``gating``), None when its gate has not decided."""
    decision = None
    for t in state.history:
        if t.candidate != version:
            continue
        if t.to_phase == "gating":
            decision = None  # a new release (or a gate run again): earlier verdicts do not count
        gate = t.evidence.get("gate")
        if isinstance(gate, dict) and gate.get("decision"):
            decision = str(gate["decision"])
    return decision


def promotion_refusal(
    state: RoutingState,
    *,
    versions: ServableVersions,
    version: str | None = None,
    force: bool = False,
    reason: str = "",
) -> str | None:
    """Why promoting the current candidate (``version`` when given) must not happen, or None.
    ``force`` overrides a missing gate pass (with a ``reason``), never an unservable version.

    Raises:
        TransientError: the store could not be asked whether the candidate can be served.
    """
    if (current := _promotable(state, version)) is None:
        return f"no release of {version or 'a candidate'} to promote (phase {state.phase})"
    if why := retired_refusal(state, current):
        return why
    if not versions.servable(current):
        known = ", ".join(versions.known()) or "none"
        return (
            f"{current} cannot be served (no complete model in the store, no upstream "
            f"configured; versions: {known}): promoting it would fail every request; abort it"
        )
    decision = gate_decision(state, current)
    if decision == PROCEED:
        return None
    if not force:
        return (
            f"{current} has not passed the golden gate in this release (gate: "
            f"{decision or 'no decision'}); to promote it anyway, force it with a reason "
            "(flywheel promote --force --reason TEXT), which the audit log records"
        )
    if not reason.strip():
        return "a forced promotion needs a reason (it is recorded in the audit log)"
    return None


def promote(
    routing: RoutingBackend,
    catalog: Catalog | None,
    *,
    actor: str,
    versions: ServableVersions,
    reason: str = "promoted by a person",
    evidence: dict[str, Any] | None = None,
    version: str | None = None,
    force: bool = False,
) -> RoutingState:
    """Make the current candidate (which must be ``version`` when given) the stable version
    (all traffic), ending its release. It must be servable and have passed the golden gate in
    this release, unless ``force`` (with a ``reason``; the promotion's evidence says
    ``forced`` and what the gate said).

    Raises:
        ReleaseInterrupted: there is no candidate release (of ``version``) to promote.
        ControlRefused: the candidate cannot be served, or has not passed the gate (no ``force``).
    """
    state = routing.load()
    refusal = promotion_refusal(
        state, versions=versions, version=version, force=force, reason=reason
    )
    if (current := _promotable(state, version)) is None:
        raise ReleaseInterrupted(str(refusal), state)
    if refusal is not None:
        raise ControlRefused(refusal)
    evidence = dict(evidence or {})
    if gate_decision(state, current) != PROCEED:
        evidence.update(forced=True, gate=gate_decision(state, current))
    moved = promotion(routing, catalog, current, actor=actor, reason=reason, evidence=evidence)
    return moved.or_raise()


def _promotable(state: RoutingState, version: str | None) -> str | None:
    """The candidate of a release that may be promoted (``version`` when given), or None."""
    current = state.candidate
    if current is None or state.phase not in (*ACTIVE, "held") or version not in (None, current):
        return None
    return current


def pause(
    routing: RoutingBackend, catalog: Catalog | None, *, actor: str, reason: str = "paused"
) -> RoutingState:
    """Hold the release in shadow or canary where it is (its traffic unchanged) until
    :func:`resume`.

    Raises:
        ControlRefused: no release is in shadow or canary.
    """
    state = routing.load()
    if state.candidate is None or state.phase not in ("shadow", "canary"):
        raise ControlRefused(f"no release in shadow or canary to pause (phase {state.phase})")
    moved = hold(
        routing,
        catalog,
        state.candidate,
        actor=actor,
        reason=reason,
        evidence={"paused": True},
        resume=Resume(phase=state.phase, step=state.step),
    )
    return moved.or_raise()


def resume(
    routing: RoutingBackend,
    catalog: Catalog | None,
    *,
    actor: str,
    reason: str = "resumed",
    handover: bool = False,
) -> RoutingState:
    """Continue a held release (paused, or held by the gate or a step for a person's review)
    at the phase and step recorded when it was held. ``handover``: the caller drives the
    release from here (a release run still waiting on the pause then ends).

    Raises:
        ControlRefused: no release is held.
    """
    state = routing.load()
    if state.candidate is None or state.phase != "held":
        raise ControlRefused(f"no held release to resume (phase {state.phase})")
    if why := retired_refusal(state, state.candidate):
        raise ControlRefused(why)
    held = next((t for t in reversed(state.history) if t.to_phase == "held"), None)
    target = (held.evidence.get("resume_to") if held else None) or {}
    phase: Phase = target.get("phase") or (held.from_phase if held else "shadow")
    if phase not in ACTIVE:
        phase = "shadow"
    routing_changes: dict[str, Any] = {
        k: float(target[k]) for k in ("weight", "shadow_fraction") if k in target
    }
    return transition(
        routing,
        catalog,
        state.candidate,
        edge=Edge(phase, ("held",)),
        actor=actor,
        reason=reason,
        evidence={"handover": True} if handover else {},
        step=int(target.get("step", 0)),
        **routing_changes,
    )


def abort(
    routing: RoutingBackend, catalog: Catalog | None, *, actor: str, reason: str = "aborted"
) -> RoutingState:
    """Stop the current release now: its candidate loses all traffic and is recorded as
    rejected (idempotent: no candidate, nothing changed; a promotion is undone by ``rollback``,
    not by abort). The decision names the release read here, so a release started meanwhile is
    never aborted by it. The ``rollback`` audit event is written by the routing backend (the
    gateway, or the store backend's catalog)."""
    state = routing.load()
    if state.candidate is None:
        return state
    return reject(
        routing,
        catalog,
        state.candidate,
        actor=actor,
        reason=f"aborted: {reason}",
        evidence={"action": "abort"},
        release_id=state.release_id,
    )


@dataclass(frozen=True, kw_only=True)
class RolledBack:
    """What :func:`roll_back` did: ``done`` (anything rolled back), ``state`` (after it, or as
    found), and ``stale``: why nothing was done, another release being current ("" if not)."""

    done: bool
    state: RoutingState
    stale: str = ""


def roll_back(
    routing: RoutingBackend,
    catalog: Catalog | None,
    *,
    actor: str,
    reason: str,
    version: str | None = None,
    release_id: str | None = None,
) -> RolledBack:
    """Take the candidate away now, or undo a promotion still baking (as
    :meth:`~infra.routing.RoutingBackend.rollback`), in the release ``version`` /
    ``release_id`` name (an alert's rollback names the one it was about; None: whatever is
    current, a person's). When another release is current nothing changes: a run that
    started late never rolls back the next candidate; the stale decision is logged and
    audited (``stale_decision``), and ``stale`` says why."""
    try:
        done, state = routing.rollback(
            reason=reason, actor=actor, version=version, release_id=release_id
        )
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
        return RolledBack(done=False, state=exc.state, stale=str(exc))
    return RolledBack(done=done, state=state)
