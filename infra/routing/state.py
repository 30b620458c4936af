"""The routing state (``deploy/state.json``): which version is stable, which is the candidate,
at what weight and shadow fraction, in which release phase, plus the history of transitions;
and the pure functions that change it (nothing here reads or writes anything).

Every decision names the release it is about (``release_id``, set when a release starts, and
the version): a rollback asked for another release than the current one is refused
(:class:`~infra.errors.ReleaseInterrupted`), and an alert counts once per release (its
fingerprint is stored under the release id).

Per workload: ``workloads`` holds, for each workload with its own release line, the same
release fields (stable, candidate, phase, weight, shadow fraction, step, rejected, release id,
alert fingerprints and its own history, so each workload's audit trail reads on its own). The
top-level fields are the shared (default) workload's release; ``retired`` and ``revision`` are
global. :meth:`RoutingState.release_of` is the state one workload's transition acts on, and a
:class:`StateChange` naming a ``workload`` changes that workload's entry alone. The shared
release is the ``default`` workload's (traces without a workload are recorded under it), so
naming ``default`` is naming the shared release."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any, Literal, Required, TypedDict, Unpack

from pydantic import BaseModel, Field, ValidationError

from infra.errors import RejectedVersion, ReleaseError, ReleaseInterrupted, StateConflict
from infra.keys import STATE_KEY
from infra.traces.conversation import DEFAULT_WORKLOAD

MAX_FINGERPRINTS = 1000

Phase = Literal["idle", "gating", "shadow", "canary", "promoted", "rolled_back", "held"]


class Rollback(TypedDict, total=False):
    """A rollback's keywords, the same wherever one is asked for (:func:`apply_rollback`,
    every :class:`~infra.routing.backend.RoutingBackend`'s ``rollback``, the gateway's admin):
    why and who; the alerts' ``fingerprints`` to remember; the release it is about
    (``version`` / ``release_id``, unset: whatever is current); ``candidate_only``: never undo
    a promotion; ``workload``: that workload's release alone (unset: the shared one)."""

    reason: Required[str]
    actor: Required[str]
    evidence: dict[str, Any] | None
    fingerprints: list[str] | None
    version: str | None
    release_id: str | None
    candidate_only: bool
    workload: str | None


class Transition(BaseModel):
    """One entry of the state's history (also written to ``audit_log`` by its author)."""

    at: datetime
    from_phase: Phase
    to_phase: Phase
    candidate: str | None = None
    weight: float = 0.0
    actor: str
    reason: str
    evidence: dict[str, Any] = {}


def own_workload(workload: str | None) -> str | None:
    """The workload whose own release ``workload`` names: None for the shared release (no
    workload, or ``default``, the workload of traces that name none)."""
    return None if workload in (None, "", DEFAULT_WORKLOAD) else workload


class ReleaseLine(BaseModel):
    """The fields of one release line: the shared one (the top level of :class:`RoutingState`)
    or a workload's own (:class:`WorkloadRelease`). ``weight`` is the candidate's share of the
    line's routed traffic in percent."""

    stable: str | None = None
    candidate: str | None = None
    phase: Phase = "idle"
    weight: float = Field(default=0.0, ge=0.0, le=100.0)
    shadow_fraction: float = Field(default=0.0, ge=0.0, le=1.0)
    step: int = 0
    rejected: list[str] = []
    history: list[Transition] = []
    # Alertmanager alerts already acted on, as "<release id>/<fingerprint>" (fingerprint_key)
    alert_fingerprints: list[str] = []
    release_id: str | None = None  # the current (or last) release; new at every release start


class WorkloadRelease(ReleaseLine):
    """One workload's own release line (docs/concepts.md, workloads); ``stable`` None: the shared
    stable version serves it until it promotes a version of its own."""


_RELEASE_FIELDS = set(ReleaseLine.model_fields) - {"stable"}


class RoutingState(ReleaseLine):
    """The routing state (docs/reference/storage.md): the shared release line at the top
    level, ``workloads`` the others' own, and what is global (``retired``, the revision)."""

    stable: str = "v0"
    retired: list[str] = []  # trained on erased data: never routed or released again
    revision: int = 0  # bumped by every save; compare-and-swap key
    updated_at: datetime | None = None
    workloads: dict[str, WorkloadRelease] = {}
    workload: str | None = None  # set only on one workload's view (release_of); never stored

    def release_of(self, workload: str | None) -> RoutingState:
        """The state a transition on ``workload`` acts on (None: the shared release, this
        state): the workload's own release, or a fresh one (idle, no candidate) over the
        shared stable version; ``retired`` and ``revision`` are the whole state's."""
        workload = own_workload(workload)
        if workload is None or self.workload == workload:
            return self
        if self.workload is not None:
            raise ValueError(f"a view of workload {self.workload} has no view of {workload}")
        own = self.workloads.get(workload) or WorkloadRelease()
        return RoutingState(
            **own.model_dump(include=_RELEASE_FIELDS),
            stable=own.stable or self.stable,
            retired=self.retired,
            revision=self.revision,
            updated_at=self.updated_at,
            workload=workload,
        )

    def for_workload(self, workload: str | None) -> RoutingState:
        """How ``workload``'s requests are routed: by its own release when it has one, else by
        the shared routing (this state: the shared stable version and the shared canary)."""
        if own_workload(workload) is None or workload not in self.workloads:
            return self
        return self.release_of(workload)

    def with_workload(self, workload: str, view: RoutingState) -> RoutingState:
        """A copy of this state whose ``workload`` entry is ``view``'s release (a view from
        :meth:`release_of` after a change); every other field, ``retired`` included, is kept.
        A stable version equal to the shared one is stored as None (it follows the shared).

        Raises:
            ReleaseError: ``workload`` names the shared release (``default``).
        """
        if own_workload(workload) is None:
            raise ReleaseError(f"{workload!r} is the shared release, not a workload of its own")
        entry = WorkloadRelease(
            **view.model_dump(include=_RELEASE_FIELDS),
            stable=None if view.stable == self.stable else view.stable,
        )
        return self.model_copy(update={"workloads": {**self.workloads, workload: entry}})

    def routable_candidate(self) -> str | None:
        """The candidate if it may receive traffic (set, not rejected, not the stable one)."""
        cand = self.candidate
        if cand is None or cand in self.rejected or cand == self.stable:
            return None
        return cand


class StateChange(BaseModel):
    """One transition (the body of ``POST /admin/state``): the fields to change (unset fields
    keep their value), why, and ``expected_revision``, which refuses to overwrite a state
    that changed since the caller read it."""

    stable: str | None = None
    candidate: str | None = None
    phase: Phase | None = None
    weight: float | None = Field(default=None, ge=0, le=100)
    shadow_fraction: float | None = Field(default=None, ge=0, le=1)
    step: int | None = None
    rejected: list[str] | None = None
    retired: list[str] | None = None
    release_id: str | None = None  # set only by the start of a release
    subject: str | None = None  # the version the history entry names (default: the candidate)
    reason: str = "admin update"
    actor: str = "admin"
    evidence: dict[str, Any] = {}
    expected_revision: int | None = None
    force: bool = False  # allow routing traffic to a rejected version
    workload: str | None = Field(default=None, min_length=1, max_length=128)  # None: shared


_ROUTING_FIELDS = {
    "stable",
    "candidate",
    "weight",
    "shadow_fraction",
    "step",
    "rejected",
    "release_id",
    "retired",
}


def new_release_id(version: str) -> str:
    """A fresh id for a release of ``version`` (readable in ``flywheel status``)."""
    return f"{version}-{secrets.token_hex(4)}"


def fingerprint_key(state: RoutingState, fingerprint: str) -> str:
    """How an alert's fingerprint is remembered: under the release it acted on, so the same
    alert in a later release (of the same version, too) is a new decision."""
    return f"{state.release_id or '-'}/{fingerprint}"


def bake_target(state: RoutingState, *, bake_s: float, now: datetime | None = None) -> str | None:
    """The previous stable version a rollback returns to while the promotion that replaced it
    is still baking (``bake_s`` seconds, the previous stable still loaded); None otherwise."""
    if state.phase != "promoted" or bake_s <= 0:
        return None
    last = next((t for t in reversed(state.history) if t.to_phase == "promoted"), None)
    if last is None or last.candidate != state.stable:
        return None
    previous = last.evidence.get("previous_stable")
    if not isinstance(previous, str) or previous in (state.stable, *state.rejected, *state.retired):
        return None
    if ((now or _now()) - last.at).total_seconds() > bake_s:
        return None
    return previous


def stale_reason(state: RoutingState, *, version: str | None, release_id: str | None) -> str | None:
    """Why a decision about ``version`` in release ``release_id`` (None: any) must not act on
    ``state``, or None when ``state`` is that release (or no release holds traffic)."""
    current = state.candidate or (state.stable if state.phase == "promoted" else None)
    if release_id is not None and state.release_id != release_id:
        return (
            f"the decision is about release {release_id}, but release {state.release_id} "
            f"({current or 'no candidate'}, {state.phase}) is current: nothing changed"
        )
    if version is not None and current not in (None, version):
        return (
            f"the decision is about {version}, but {current} is the current release "
            f"({state.phase}): nothing changed"
        )
    return None


def parse_state(raw: bytes) -> RoutingState:
    """The state in ``raw`` (JSON).

    Raises:
        ReleaseError: it is not valid JSON for :class:`RoutingState`.
    """
    try:
        return RoutingState.model_validate_json(raw)
    except ValidationError as exc:
        raise ReleaseError(f"{STATE_KEY} is invalid: {exc.error_count()} error(s)") from exc


def record_transition(
    state: RoutingState,
    *,
    to_phase: Phase,
    actor: str,
    reason: str,
    evidence: dict[str, Any] | None = None,
    **changes: Any,
) -> RoutingState:
    """A copy of ``state`` moved to ``to_phase`` with ``changes`` applied and history appended."""
    new = state.model_copy(update={**changes, "phase": to_phase}, deep=True)
    new.history.append(
        Transition(
            at=_now(),
            from_phase=state.phase,
            to_phase=to_phase,
            candidate=new.candidate,
            weight=new.weight,
            actor=actor,
            reason=reason,
            evidence=evidence or {},
        )
    )
    return RoutingState.model_validate(new.model_dump())


def apply_change(state: RoutingState, change: StateChange) -> RoutingState:
    """``state`` after ``change`` (not yet written).

    Raises:
        StateConflict: ``change.expected_revision`` is not the state's revision.
        RejectedVersion: the change routes traffic to a rejected version without ``force``.
    """
    if change.expected_revision is not None and change.expected_revision != state.revision:
        raise StateConflict(
            f"state is at revision {state.revision}, not {change.expected_revision}"
        )
    if (workload := own_workload(change.workload)) is not None and state.workload is None:
        if change.retired is not None:
            raise ReleaseError("retired versions are global: retire them without a workload")
        view = apply_change(state.release_of(workload), change)
        return state.with_workload(workload, view)
    fields = change.model_dump(include=_ROUTING_FIELDS, exclude_unset=True)
    new = record_transition(
        state,
        to_phase=change.phase or state.phase,
        actor=change.actor,
        reason=change.reason,
        evidence=change.evidence,
        **fields,
    )
    if change.subject is not None:
        new.history[-1].candidate = change.subject
    routed = new.candidate and (new.weight > 0 or new.shadow_fraction > 0)
    if routed and new.candidate in new.rejected and not change.force:
        raise RejectedVersion(f"{new.candidate} was rejected; pass force=true to route it")
    routed_to = [new.stable] + ([new.candidate] if routed and new.candidate else [])
    if retired := sorted(set(routed_to) & set(new.retired)):
        raise RejectedVersion(
            f"{retired[0]} was retired after an erasure; it is never routed again"
        )
    return new


def apply_rollback(
    state: RoutingState,
    *,
    bake_s: float = 0.0,
    now: datetime | None = None,
    **rollback: Unpack[Rollback],
) -> RoutingState | None:
    """The rolled-back state, or None if there is nothing to roll back (a rollback is
    idempotent). A candidate loses its traffic (weight 0, shadow 0) and is rejected; without
    one, a promotion still baking (``bake_s``, unless ``candidate_only``) is undone: the
    previous stable is stable again and the promoted version rejected. ``fingerprints`` are
    remembered under the release rolled back. ``workload``: that workload's release alone.

    Raises:
        ReleaseInterrupted: ``version`` / ``release_id`` name another release than the current
            (of ``workload``; the exception carries that workload's view).
    """
    if (workload := own_workload(rollback.get("workload"))) is not None and state.workload is None:
        shared: Rollback = {**rollback, "workload": None}
        view = apply_rollback(state.release_of(workload), bake_s=bake_s, now=now, **shared)
        return None if view is None else state.with_workload(workload, view)
    version, release_id = rollback.get("version"), rollback.get("release_id")
    if why := stale_reason(state, version=version, release_id=release_id):
        raise ReleaseInterrupted(why, state)
    fingerprints = rollback.get("fingerprints") or []
    seen = state.alert_fingerprints + [fingerprint_key(state, f) for f in fingerprints]
    changes: dict[str, Any] = {
        "weight": 0.0,
        "shadow_fraction": 0.0,
        "alert_fingerprints": seen[-MAX_FINGERPRINTS:],
    }
    cand = state.candidate
    previous = (
        None if rollback.get("candidate_only") else bake_target(state, bake_s=bake_s, now=now)
    )
    evidence = rollback.get("evidence")
    if cand is not None or state.weight > 0 or state.shadow_fraction > 0:
        subject = cand
    elif previous is not None:
        subject = state.stable
        changes["stable"] = previous
        evidence = {**(evidence or {}), "previous_stable": previous, "promotion": subject}
    else:
        return None
    rejected = list(state.rejected)
    if (
        subject is not None
        and subject not in rejected
        and subject != changes.get("stable", state.stable)
    ):
        rejected.append(subject)
    new = record_transition(
        state,
        to_phase="rolled_back",
        actor=rollback["actor"],
        reason=rollback["reason"],
        evidence=evidence,
        rejected=rejected,
        **changes,
    )
    new.history[-1].candidate = subject
    new.candidate = None
    return new


def _now() -> datetime:
    return datetime.now(UTC)
