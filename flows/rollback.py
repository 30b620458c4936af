"""Stage 5 flow: ``rollback`` (on demand, and triggered by the gateway when an alert fires)."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from infra.flow_docs import described
from infra.parameters import ReleaseId, RollbackVersion, Workload
from infra.routing import RoutingState, open_routing, scoped
from infra.runtime import Runtime
from tasks.release.machine.rollback import (
    Rollback,
    log_rollback,
    restore_stable,
    roll_back_task,
    rollback_result,
    settle_rollback,
)
from tasks.run_report import publish_outcome


@described
@flow(name="rollback", log_prints=False)
def rollback(
    reason: str = "manual",
    actor: str = "prefect",
    workload: Workload | None = None,
    version: RollbackVersion | None = None,
    release_id: ReleaseId | None = None,
) -> dict[str, Any]:
    """Roll back the candidate model now: its traffic weight and shadow share go to 0 and it is
    recorded as rejected (never released automatically again). With no candidate, a promotion
    still in its bake period (FLYWHEEL_MODEL_SERVER__BAKE_S, the previous stable still loaded)
    is undone in one step: the previous stable version is stable again and the promoted one
    rejected. Goes through the gateway's
    admin API when FLYWHEEL_GATEWAY__URL is set (the gateway applies it at once and writes
    deploy/state.json and the audit event), else writes deploy/state.json directly. Then, if
    the stable version itself cannot be served (no complete model in the store, no upstream
    configured), the newest earlier stable version that can is made stable again; the run
    fails loudly when there is none. Safe to run twice: with nothing routed to a candidate and
    a servable stable version it changes nothing. A run naming a release (the gateway names
    the one an alert rolled back) changes nothing when another release is current: a run that
    starts late never rolls back the next candidate.

    Args:
        reason: Why, in a few words; recorded in the audit log (no personal data).
        actor: Who or what asked (a person's name, or the alert); recorded in the audit log.
        workload: Roll back this workload's release alone (empty: the shared release); an
            alert labelled with a workload names it.
        version: The candidate (or promoted version) to roll back; when another one is
            current nothing is done (empty: whatever is current).
        release_id: The release to roll back (as `flywheel status` shows it); when another
            release is current nothing is done (empty: whatever is current).
    """
    rt = Runtime.from_env()
    routing = scoped(open_routing(rt.settings, rt.store, catalog=rt.catalog), workload)
    asked = roll_back_task(
        routing, rt.catalog, reason=reason, actor=actor, version=version, release_id=release_id
    )
    run = Rollback(reason=reason, actor=actor, workload=workload, via=routing.name)
    if asked.stale:  # started late: its release ended; the current one is none of its business
        get_run_logger().warning("rollback not made: %s", asked.stale)
        _publish(run, f"rollback not made: {asked.stale}", asked.state)
        return rollback_result(run, None, asked.state) | {"stale": asked.stale}
    run.done = asked.done
    state = restore_stable(rt, routing, asked.state, run)  # else run.unservable says why
    gone = settle_rollback(rt, state, run)  # audited, unloaded, its model card marked
    if run.unservable is not None:
        raise run.unservable
    log_rollback(run)
    done = "done" if run.done else "nothing to roll back"
    _publish(run, f"rollback via {run.via}: {done} ({run.reason})", state)
    return rollback_result(run, gone, state)


def _publish(run: Rollback, summary: str, state: RoutingState) -> None:
    """The run's ``rollback`` artifact: ``summary`` and the routing state after."""
    details = {"workload": run.workload or "shared", "actor": run.actor, "via": run.via}
    if run.restored:
        details["stable restored"] = f"{run.restored} (in place of {run.broken})"
    after = {k: getattr(state, k) for k in ("stable", "candidate", "phase", "weight")}
    publish_outcome(key="rollback", summary=summary, details=details | after)
