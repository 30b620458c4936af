"""One workload's release through any :class:`~infra.routing.backend.RoutingBackend`: what it
loads is that workload's view (:meth:`~infra.routing.state.RoutingState.release_of`), and every
change and rollback it makes names the workload, so the release state machine, the controls
and the release flow act on one workload without knowing there are others. The
compare-and-swap stays one revision for the whole state: a change to workload A written while
B changed is retried on the state B left, and never undoes B's change."""

from __future__ import annotations

from typing import TYPE_CHECKING, Unpack

from infra.errors import ReleaseInterrupted
from infra.routing.state import Rollback, RoutingState, StateChange, own_workload

if TYPE_CHECKING:
    from infra.routing.backend import RoutingBackend


class WorkloadRouting:
    """``backend`` scoped to ``workload``'s release (see the module docstring)."""

    def __init__(self, backend: RoutingBackend, workload: str) -> None:
        self.backend = backend
        self.workload = workload
        self.name = backend.name

    def load(self) -> RoutingState:
        """The workload's release (its own, or a fresh one over the shared stable version)."""
        return self.backend.load().release_of(self.workload)

    def transition(self, change: StateChange) -> RoutingState:
        """Apply ``change`` to the workload's release alone; returns the workload's view.

        Raises:
            StateConflict: the whole state is not at ``change.expected_revision`` any more.
            RejectedVersion: the change routes the workload to a rejected version.
        """
        scoped = StateChange(**change.model_dump(exclude_unset=True), workload=self.workload)
        return self.backend.transition(scoped).release_of(self.workload)

    def rollback(self, **rollback: Unpack[Rollback]) -> tuple[bool, RoutingState]:
        """Roll back the workload's release alone (the :class:`Rollback` keywords but
        ``workload``, which is this workload's); returns (whether anything changed, its view).

        Raises:
            ReleaseInterrupted: another release of this workload is current (nothing done).
        """
        try:
            scoped: Rollback = {**rollback, "workload": self.workload}
            done, state = self.backend.rollback(**scoped)
        except ReleaseInterrupted as exc:
            view = exc.state.release_of(self.workload) if exc.state.workload is None else exc.state
            raise ReleaseInterrupted(str(exc), view) from exc
        return done, state.release_of(self.workload)


def scoped(backend: RoutingBackend, workload: str | None) -> RoutingBackend:
    """``backend`` for ``workload``'s release; ``backend`` itself for the shared one (None, or
    ``default``)."""
    if (workload := own_workload(workload)) is None:
        return backend
    return WorkloadRouting(backend, workload)
