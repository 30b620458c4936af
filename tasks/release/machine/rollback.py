"""The steps of the ``rollback`` flow (:mod:`flows.rollback`): take the candidate away (or undo
a promotion still baking), make a servable stable version stable again when the stable one
cannot be served, then audit the run, unload what nothing routes to, mark the model card, log
the outcome and build the result ``flywheel rollback`` prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prefect import get_run_logger, task

from infra.audit import record_event
from infra.errors import UnservableVersion
from infra.serving.base_servers import open_model_server
from infra.serving.models import ServableVersions
from infra.task_retries import IO_RETRIES
from tasks.release.machine.card import update_card
from tasks.release.machine.controls import roll_back
from tasks.release.machine.restore import restore_servable_stable
from tasks.release.machine.serving import unload_unrouted

if TYPE_CHECKING:
    from infra.routing import RoutingBackend, RoutingState
    from infra.runtime import Runtime

roll_back_task = task(**IO_RETRIES)(roll_back)
restore_stable_task = task(**IO_RETRIES)(restore_servable_stable)


@dataclass(kw_only=True)
class Rollback:
    """One rollback run: who asked, why, on which release line and through what (``via``: the
    gateway or the state file), and what it did: ``done`` (a candidate or a baking promotion
    rolled back), ``broken`` (the stable version before the restore), ``restored`` (the
    servable version made stable in its place) or ``unservable`` (none could be)."""

    reason: str
    actor: str
    workload: str | None
    via: str
    done: bool = False
    broken: str | None = None
    restored: str | None = None
    unservable: UnservableVersion | None = None


def restore_stable(
    rt: Runtime, routing: RoutingBackend, state: RoutingState, run: Rollback
) -> RoutingState:
    """Make the newest earlier servable stable version stable again when ``state``'s stable
    version cannot be served (``run.restored``, ``run.broken``); returns the state after. When
    none can be, ``run.unservable`` holds the error and ``state`` is returned unchanged."""
    run.broken = state.stable
    try:
        state, run.restored = restore_stable_task(
            routing,
            rt.catalog,
            versions=ServableVersions.from_settings(rt.settings, rt.store),
            actor=run.actor,
            reason=run.reason,
        )
    except UnservableVersion as exc:
        run.unservable = exc
    return state


def settle_rollback(rt: Runtime, state: RoutingState, run: Rollback) -> str | None:
    """Audit the run (``rollback_flow``), unload the candidate from the model server once the
    stable version serves, and mark the rolled-back version's model card; returns that
    version (None: nothing was rolled back)."""
    record_event(
        rt.catalog,
        event_type="rollback_flow",
        actor=run.actor,
        subject=state.stable,
        details={
            "reason": run.reason,
            "workload": run.workload,
            "via": run.via,
            "rolled_back": run.done,
            "release_id": state.release_id,
            "restored_stable": run.restored,
            "unservable_stable": run.broken if run.restored or run.unservable else None,
            "revision": state.revision,
            "phase": state.phase,
            "weight": state.weight,
        },
        best_effort=True,
    )
    if run.unservable is None:  # routed to stable above; now the candidate leaves the server
        unload_unrouted(rt, open_model_server(rt.settings, rt.store), state)
    rolled = [t.candidate for t in state.history if t.to_phase == "rolled_back" and t.candidate]
    if run.done and rolled:
        update_card(rt.store, rolled[-1], state=state)
    return rolled[-1] if run.done and rolled else None


def log_rollback(run: Rollback) -> None:
    """The run's log lines: a warning when a servable stable version replaced a broken one,
    then what was done."""
    logger = get_run_logger()
    if run.restored:
        logger.warning(
            "stable %s cannot be served: %s is the stable version again", run.broken, run.restored
        )
    logger.info(
        "rollback via %s: %s (%s)",
        run.via,
        "done" if run.done else "nothing to roll back",
        run.reason,
    )


def rollback_result(run: Rollback, version: str | None, state: RoutingState) -> dict[str, Any]:
    """The run's result (what ``flywheel rollback`` prints): whether anything was rolled back
    (``version``) or a servable stable ``restored`` in place of ``broken``, and the state."""
    return {
        "rolled_back": run.done or run.restored is not None,
        "version": version,
        "restored_stable": run.restored,
        "unservable_stable": run.broken if run.restored else None,
        "via": run.via,
        "workload": run.workload,
        "state": state.model_dump(mode="json"),
    }
