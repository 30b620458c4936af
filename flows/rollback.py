"""Stage 5 flow: ``rollback`` (on demand, and triggered by the gateway when an alert fires)."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infra.errors import ReleaseError, TransientStoreError
from infra.gateway.client import GatewayAdmin
from infra.gateway.state import (
    RoutingState,
    persist_rollback,
    write_audit,
    write_rollback_audit,
)
from infra.retries import retry_on
from infra.runtime import Runtime


@task(
    retries=3,
    retry_delay_seconds=[1, 3, 10],
    retry_jitter_factor=0.5,
    retry_condition_fn=retry_on(ReleaseError, TransientStoreError),
    cache_policy=NO_CACHE,
)
def rollback_via_gateway(admin: GatewayAdmin, reason: str, actor: str) -> tuple[bool, RoutingState]:
    """Returns whether the gateway rolled anything back, and its state after."""
    return admin.rollback(reason=reason, actor=actor)


@task(
    retries=3,
    retry_delay_seconds=[1, 3, 10],
    retry_jitter_factor=0.5,
    retry_condition_fn=retry_on(ReleaseError, TransientStoreError),
    cache_policy=NO_CACHE,
)
def rollback_in_store(rt: Runtime, reason: str, actor: str) -> tuple[bool, RoutingState]:
    """Returns whether the stored state was rolled back, and the state after."""
    saved, before = persist_rollback(rt.store, reason=reason, actor=actor)
    if before is not None:
        write_rollback_audit(rt.catalog, saved, before=before)
    return before is not None, saved


@flow(name="rollback", log_prints=False)
def rollback(reason: str = "manual", actor: str = "prefect") -> dict[str, Any]:
    """Roll back the candidate model now: its traffic weight and shadow share go to 0 and it is
    recorded as rejected (never released automatically again). Goes through the gateway's
    admin API when FLYWHEEL_GATEWAY__URL is set (the gateway applies it at once and writes
    deploy/state.json and the audit event), else writes deploy/state.json directly. Safe to
    run twice: with nothing routed to a candidate it changes nothing."""
    logger = get_run_logger()
    rt = Runtime.from_env()
    admin = GatewayAdmin.from_settings(rt.settings)
    if admin is not None:
        done, state = rollback_via_gateway(admin, reason, actor)
        via = "gateway"
    else:
        done, state = rollback_in_store(rt, reason, actor)
        via = "store"
    write_audit(
        rt.catalog, event_type="rollback_flow", actor=actor, subject=state.stable,
        details={"reason": reason, "via": via, "rolled_back": done, "revision": state.revision,
                 "phase": state.phase, "weight": state.weight},
    )  # fmt: skip
    logger.info("rollback via %s: %s (%s)", via, "done" if done else "nothing to roll back", reason)
    return {"rolled_back": done, "via": via, "state": state.model_dump(mode="json")}
