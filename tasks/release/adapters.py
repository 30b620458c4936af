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

from infra.model_server import adapter_path
from infra.retries import IO_RETRIES

if TYPE_CHECKING:
    from infra.model_server import ModelServer
    from infra.routing import RoutingState
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
    """Unload every adapter the routing state no longer routes to: a rejected or rolled-back
    candidate and a retired version (erasure) at once, a former stable version once ``bake_s``
    passed since its successor was promoted. Returns the versions unloaded (the base model is never unloaded)."""
    now = now or datetime.now(UTC)
    keep = {state.stable, server.base_version}
    cand = state.routable_candidate()
    if cand is not None:
        keep.add(cand)
    gone = []
    for version in server.served():
        if version in keep:
            continue
        if version not in state.rejected and version not in state.retired:
            since = retired_at(state, version)
            if since is not None and (now - since).total_seconds() < bake_s:
                continue  # baking: the previous stable version, kept for an instant rollback
        server.unload(version)
        gone.append(version)
    return gone


load_candidate_task = task(**IO_RETRIES)(load_candidate)
unload_unrouted_task = task(**IO_RETRIES)(unload_unrouted)
