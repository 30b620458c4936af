"""Stage 5's ``release-control`` flow: a person's promote / pause / resume / abort of the
release in progress (resume continues the release through the ``release`` flow)."""

from __future__ import annotations

from typing import Any, Literal

from prefect import flow, get_run_logger

from flows.release import ReleaseOptions, release
from infra.errors import ControlRefused
from infra.flow_docs import described
from infra.parameters import Workload
from infra.routing import RoutingBackend, open_routing, scoped
from infra.runtime import Runtime
from infra.serving.base_servers import open_model_server
from infra.serving.models import ServableVersions
from infra.settings.workloads import configured_workload
from tasks.release.machine import controls
from tasks.release.machine.outcome import ReleaseOutcome, control_status
from tasks.release.machine.serving import unload_unrouted
from tasks.run_report import publish_outcome

Action = Literal["promote", "pause", "resume", "abort"]


@described
@flow(name="release-control", log_prints=False)
def release_control(
    action: Action,
    reason: str = "manual",
    actor: str = "person",
    options: ReleaseOptions | None = None,
    force: bool = False,
    workload: Workload | None = None,
) -> dict[str, Any]:
    """A person's decision on the current release: promote the candidate to stable, pause it
    where it is, resume a held release (and continue it: the canary analysis runs on to
    promotion, with the options below for that run), or abort it (the candidate loses all traffic
    and is never released automatically again). Returns the routing state after. Promote
    refuses a candidate that cannot be served, and one that has not passed the golden gate
    unless force is set with a reason (recorded with the promotion in the audit log);
    resume refuses a candidate that cannot be served.

    Args:
        action: promote, pause, resume or abort the release in progress.
        reason: Why, in a few words; recorded in the audit log (no personal data).
        actor: Who decided; recorded in the audit log.
        options: Only for resume: pacing of the release it continues. Empty: the settings.
        force: Only for promote: promote a candidate the gate did not pass (needs a reason).
        workload: Act on this workload's release alone (empty: the shared release); one
            FLYWHEEL_WORKLOADS lists.
    """
    rt = Runtime.from_env()
    configured_workload(workload, rt.settings.workloads)  # never a line of any other name
    routing = scoped(open_routing(rt.settings, rt.store, catalog=rt.catalog), workload)
    versions = ServableVersions.from_settings(rt.settings, rt.store)
    continued: ReleaseOutcome | None = None
    if action == "resume":
        opts = (options or ReleaseOptions(actor=actor)).model_copy(update={"workload": workload})
        continued = _resume(rt, routing, versions, actor=actor, reason=reason, options=opts)
    elif action == "promote":
        if force and reason == "manual":  # the default says nothing about why
            raise ControlRefused(
                "a forced promotion needs a reason: say why the gate is overridden"
            )
        controls.promote(
            routing, rt.catalog, actor=actor, reason=reason, versions=versions, force=force
        )
    else:
        act = {"pause": controls.pause, "abort": controls.abort}
        act[action](routing, rt.catalog, actor=actor, reason=reason)
        if action == "abort":  # routed to stable at once above; then unloaded
            unload_unrouted(rt, open_model_server(rt.settings, rt.store), routing.load())
    summary = f"release {action} by {actor} ({workload or 'shared'}): {reason}"
    get_run_logger().info(summary)
    after = routing.load()
    details = {k: getattr(after, k) for k in ("stable", "candidate", "phase", "weight")}
    publish_outcome(key="release-control", summary=summary, details=details)
    return control_status(rt, routing, continued)


def _resume(
    rt: Runtime,
    routing: RoutingBackend,
    versions: ServableVersions,
    *,
    actor: str,
    reason: str,
    options: ReleaseOptions,
) -> ReleaseOutcome | None:
    """Resume the held release (its candidate must be servable: resuming routes traffic to
    it again) and continue it through the ``release`` flow with ``options``; returns that
    run's outcome (None when the resumed release has no candidate)."""
    if (candidate := routing.load().candidate) is not None:
        versions.require(candidate)
    state = controls.resume(routing, rt.catalog, actor=actor, reason=reason, handover=True)
    if state.candidate is None:
        return None
    return release(state.candidate, options)
