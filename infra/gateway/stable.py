"""Whether the stable version can be served at all, said where an operator looks first (the
start of ``flywheel gateway``, ``flywheel status``), with what to run about it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.serving.models import ServableVersions

if TYPE_CHECKING:
    from infra.settings import Settings
    from infra.store import ObjectStore


def unservable_stable(settings: Settings, store: ObjectStore, stable: str) -> str | None:
    """None when ``stable`` has an upstream, the model server or a model in the store; else
    one sentence saying why it cannot be served and what to run."""
    if settings.model_server.enabled:
        return None  # the model server is asked at request time (/healthz says)
    try:
        if ServableVersions.from_settings(settings, store).servable(stable):
            return None
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        return f"the stable version {stable} cannot be checked: the store cannot be read ({exc})"
    return (
        f"the stable version {stable} cannot be served: it is not in the store and has no "
        "upstream; run `flywheel bootstrap` (the demo's v0) or give it one in "
        "FLYWHEEL_GATEWAY__UPSTREAMS"
    )
