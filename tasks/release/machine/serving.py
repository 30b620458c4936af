"""The release flow's model-server steps (vLLM adapters): refuse a release the server has no
room for, hold a release whose candidate a replica cannot load, and unload what the routing
state no longer routes to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prefect import get_run_logger

from infra.errors import ControlRefused, ModelServerError
from tasks.release.machine.adapters import unload_unrouted_task
from tasks.release.machine.machine import hold_task
from tasks.release.machine.transitions import Resume

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.routing import RoutingBackend, RoutingState
    from infra.runtime import Runtime
    from infra.serving.model_server import ModelServer


def hold_unloadable(
    routing: RoutingBackend,
    catalog: Catalog | None,
    version: str,
    *,
    actor: str,
    exc: ModelServerError,
    release_id: str | None = None,
) -> tuple[RoutingState, str]:
    """Hold the release (back to the gate when resumed) with the server's refusal as reason."""
    held = hold_task(
        routing,
        catalog,
        version,
        actor=actor,
        resume=Resume(phase="gating"),
        reason=str(exc),
        evidence={"model_server": str(exc)[:500]},
        release_id=release_id,
    )
    return held.state, "held"


def server_args(rt: Runtime) -> dict[str, Any]:
    """The keywords of ``load_candidate``: the model-server settings and the model cache."""
    from infra.serving.models import model_cache_root

    return {"settings": rt.settings.model_server, "cache_root": model_cache_root(rt.settings)}


def unload_unrouted(rt: Runtime, server: ModelServer | None, state: RoutingState) -> None:
    """After the routing state moved: unload the adapters it no longer routes to (a failure
    is logged: the gateway already routes nothing to them)."""
    if server is None:
        return
    try:
        gone = unload_unrouted_task(server, state, bake_s=rt.settings.model_server.bake_s)
    except ModelServerError as exc:
        get_run_logger().warning("adapters not unloaded: %s", exc)
        return
    if gone:
        get_run_logger().info("unloaded from the model server: %s", ", ".join(gone))


def require_room(rt: Runtime, server: ModelServer, state: RoutingState, version: str) -> None:
    """Nothing when ``server`` serves ``version`` or has room for its adapter under
    ``FLYWHEEL_MODEL_SERVER__MAX_LORAS``, once the adapters the whole routing ``state`` no
    longer routes to are unloaded.

    Raises:
        ControlRefused: it is full (one line: the limit and the adapters it holds).
    """
    unload_unrouted(rt, server, state)
    limit = rt.settings.model_server.max_loras
    if limit is not None and (why := server.refusal(version, limit)):
        raise ControlRefused(why)
