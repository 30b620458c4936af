"""The release's side of the model server: the candidate's adapter is loaded before the gate
asks it anything (so before shadow), a rolled-back or rejected candidate is unloaded once the
gateway routes nothing to it, and an old stable version stays loaded for ``bake_s`` after a
promotion (a rollback after the promotion is then instant) and is unloaded after that.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from prefect import task

from infra.serving.model_server import adapter_path
from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from infra.routing import RoutingState
    from infra.serving.model_server import ModelServer
    from infra.settings import ModelServerSettings
    from infra.store import ObjectStore


def load_candidate(
    server: ModelServer,
    store: ObjectStore,
    version: str,
    *,
    settings: ModelServerSettings,
    cache_root: Path,
) -> str:
    """Load ``version``'s adapter on every replica; returns the path the server read.

    Raises:
        ModelServerError: a replica did not load it (the release holds with this reason).
    """
    path = adapter_path(store, version, settings=settings, cache_root=cache_root)
    server.load(version, path)
    return path


def retired_at(state: RoutingState, version: str) -> datetime | None:
    """When ``version`` stopped being the stable version (None: it never was, or still is)."""
    for entry in reversed(state.history):
        if entry.to_phase == "promoted" and entry.candidate not in (None, version):
            return entry.at
    return None


def unload_unrouted(
    server: ModelServer, state: RoutingState, *, bake_s: float, now: datetime | None = None
) -> list[str]:
    """Unload every adapter the routing state no longer routes to, in any workload: a
    rejected or rolled-back candidate and a retired version (erasure) at once, a former stable
    version once ``bake_s`` passed since its successor was promoted. Given one workload's view
    (``state.workload`` set), only that workload's rejected and the retired versions are
    unloaded (the view does not show what the others route to). Returns the versions unloaded
    (the base model is never unloaded)."""
    now = now or datetime.now(UTC)
    views = [state] + [state.release_of(w) for w in state.workloads]
    keep = {server.base_version} | {v.stable for v in views}
    keep |= {cand for v in views if (cand := v.routable_candidate()) is not None}
    gone = []
    for version in server.served():
        if version in keep:
            continue
        done_with = version in state.retired or any(version in v.rejected for v in views)
        if not done_with and (state.workload is not None or _baking(views, version, now, bake_s)):
            continue  # a view cannot tell; baking: kept for an instant rollback
        server.unload(version)
        gone.append(version)
    return gone


def _baking(views: list[RoutingState], version: str, now: datetime, bake_s: float) -> bool:
    """Whether ``version`` is a former stable version of some workload still in its bake time."""
    for view in views:
        since = retired_at(view, version)
        if since is not None and (now - since).total_seconds() < bake_s:
            return True
    return False


load_candidate_task = task(**IO_RETRIES)(load_candidate)
unload_unrouted_task = task(**IO_RETRIES)(unload_unrouted)
