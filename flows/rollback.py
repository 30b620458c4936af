"""Stage 5 flow: ``rollback`` (on demand, and triggered by the gateway when an alert fires)."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task

from infra.audit import record_event
from infra.errors import UnservableVersion
from infra.model_server import open_model_server
from infra.models import ServableVersions
from infra.parameters import ReleaseName
from infra.retries import IO_RETRIES
from infra.routing import RoutingState, open_routing, scoped
from infra.runtime import Runtime
from tasks.release.card import update_card
from tasks.release.controls import roll_back
from tasks.release.restore import restore_servable_stable
from tasks.release.serving import unload_unrouted

roll_back_task = task(**IO_RETRIES)(roll_back)
restore_stable_task = task(**IO_RETRIES)(restore_servable_stable)


@flow(name="rollback", log_prints=False)
def rollback(
    reason: str = "manual",
    actor: str = "prefect",
    workload: str | None = None,
    version: ReleaseName | None = None,
    release_id: ReleaseName | None = None,
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
    logger = get_run_logger()
    rt = Runtime.from_env()
    routing = scoped(open_routing(rt.settings, rt.store, catalog=rt.catalog), workload)
    asked = roll_back_task(
        routing, rt.catalog, reason=reason, actor=actor, version=version, release_id=release_id
    )
    if asked.stale:  # started late: its release ended; the current one is none of its business
        logger.warning("rollback not made: %s", asked.stale)
        found = _result(False, None, asked.state, via=routing.name, workload=workload)
        return found | {"stale": asked.stale}
    done, state = asked.done, asked.state
    unservable: UnservableVersion | None = None
    restored: str | None = None
    broken = state.stable
    try:
        state, restored = restore_stable_task(
            routing,
            rt.catalog,
            versions=ServableVersions.from_settings(rt.settings, rt.store),
            actor=actor,
            reason=reason,
        )
    except UnservableVersion as exc:
        unservable = exc
    record_event(
        rt.catalog,
        event_type="rollback_flow",
        actor=actor,
        subject=state.stable,
        details={
            "reason": reason,
            "workload": workload,
            "via": routing.name,
            "rolled_back": done,
            "release_id": state.release_id,
            "restored_stable": restored,
            "unservable_stable": broken if restored or unservable else None,
            "revision": state.revision,
            "phase": state.phase,
            "weight": state.weight,
        },
        best_effort=True,
    )
    if unservable is None:  # routed to stable above; now the candidate leaves the server
        unload_unrouted(rt, open_model_server(rt.settings.model_server), state)
    rolled = [t.candidate for t in state.history if t.to_phase == "rolled_back" and t.candidate]
    if done and rolled:
        update_card(rt.store, rolled[-1], state=state)
    if unservable is not None:
        raise unservable
    if restored:
        logger.warning(
            "stable %s cannot be served: %s is the stable version again", broken, restored
        )
    logger.info(
        "rollback via %s: %s (%s)", routing.name, "done" if done else "nothing to roll back", reason
    )
    gone = rolled[-1] if done and rolled else None
    return _result(
        done, gone, state, via=routing.name, workload=workload, restored=restored, broken=broken
    )


def _result(
    done: bool,
    version: str | None,
    state: RoutingState,
    *,
    via: str,
    workload: str | None,
    restored: str | None = None,
    broken: str | None = None,
) -> dict[str, Any]:
    """The run's result (what ``flywheel rollback`` prints): whether anything was rolled back
    (``version``) or a servable stable ``restored`` in place of ``broken``, and the state."""
    return {
        "rolled_back": done or restored is not None,
        "version": version,
        "restored_stable": restored,
        "unservable_stable": broken if restored else None,
        "via": via,
        "workload": workload,
        "state": state.model_dump(mode="json"),
    }
