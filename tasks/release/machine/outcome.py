"""What one ``release`` run did (:class:`ReleaseOutcome`), the plans that leave it nothing to do
(:data:`NOTHING_TO_DO`), and its conclusion with the run's log line (:func:`conclude`); what a
``release-control`` run returns (:func:`control_status`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from prefect import get_run_logger

from tasks.release.machine.card import update_card
from tasks.release.machine.controls import release_status

if TYPE_CHECKING:
    from infra.routing import RoutingBackend, RoutingState
    from infra.runtime import Runtime


@dataclass(kw_only=True)
class ReleaseOutcome:
    """What one release run did: outcome, phase reached, reasons and the gate's numbers."""

    version: str
    workload: str | None = None  # None: the shared release
    outcome: str = ""  # promoted | rolled_back | held | rejected | stable | interrupted
    phase: str = ""
    reasons: list[str] = field(default_factory=list)
    gate: dict[str, Any] | None = None
    report_keys: dict[str, str] = field(default_factory=dict)
    phases: list[dict[str, Any]] = field(default_factory=list)


NOTHING_TO_DO = {
    "stable": "{v} is already the stable version",
    "rejected": "{v} was rejected before; only a person may release it again (force)",
    "held": "the release of {v} is held for a person: resume, promote or abort it first",
    "retired": "{v} is retired after an erasure; it is never released again",
}
# the outcome of a run that ended in these phases (any other: interrupted)
CONCLUDED = {"promoted": "promoted", "rolled_back": "rolled_back", "held": "held"}


def conclude(
    out: ReleaseOutcome, outcome: str, state: RoutingState, reasons: list[str]
) -> ReleaseOutcome:
    """Record the run's ``outcome``, the phase ``state`` is in and the ``reasons``, log them,
    and return ``out``."""
    out.outcome, out.phase, out.reasons = outcome, state.phase, reasons
    get_run_logger().info("release %s: %s (%s)", out.version, outcome, "; ".join(reasons))
    return out


def control_status(
    rt: Runtime, routing: RoutingBackend, continued: ReleaseOutcome | None = None
) -> dict[str, Any]:
    """After a person's decision: the model card of the version its last transition names
    updated, and the routing state (:func:`~tasks.release.machine.controls.release_status`) with the
    outcome of the release a resume ``continued`` (``release``)."""
    after = routing.load()
    if after.history and (subject := after.history[-1].candidate):
        update_card(rt.store, subject, state=after)
    status = release_status(routing)
    if continued is not None:
        status["release"] = asdict(continued)
    return status
