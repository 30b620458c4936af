"""When the stable version cannot be served (every user request would fail): the earlier
stable versions, and the one compare-and-swap that makes the newest servable one stable again
(``flywheel rollback`` runs it after taking the candidate away)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from infra.errors import UnservableVersion
from infra.routing import (
    RoutingBackend,
    RoutingState,
    StateChange,
    compare_and_swap,
    record_decision,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.serving.models import ServableVersions

log = logging.getLogger(__name__)


def earlier_stables(state: RoutingState) -> list[str]:
    """The versions that were stable before the current one, newest first: each promotion's
    version and the stable it replaced, then ``v0`` (every routing state starts with it)."""
    seen: list[str] = []
    for t in reversed(state.history):
        if t.to_phase == "promoted":
            seen += [v for v in (t.candidate, t.evidence.get("previous_stable")) if v]
    seen.append(RoutingState().stable)
    return [v for v in dict.fromkeys(seen) if v != state.stable]


def restore_servable_stable(
    routing: RoutingBackend,
    catalog: Catalog | None,
    *,
    versions: ServableVersions,
    actor: str,
    reason: str,
) -> tuple[RoutingState, str | None]:
    """When the stable version cannot be served (every user request would fail), make the
    newest earlier stable version that can be served, and was neither rejected nor retired,
    the stable one again. Returns the state and the version restored (None: the stable one
    is servable).

    Raises:
        UnservableVersion: neither the stable version nor any earlier one can be served.
        StateConflict: the state kept changing (transient).
    """

    def decide(state: RoutingState) -> StateChange | None:
        bad = state.stable
        if versions.servable(bad):
            return None
        ok = [v for v in earlier_stables(state) if v not in {*state.rejected, *state.retired}]
        target = next((v for v in ok if versions.servable(v)), None)
        if target is None:
            raise UnservableVersion(
                f"the stable version {bad} cannot be served and no earlier stable version can "
                f"(tried {', '.join(ok) or 'none'}); release a servable version "
                f"(versions: {', '.join(versions.known()) or 'none'})"
            )
        return StateChange(
            stable=target,
            phase="rolled_back",
            subject=target,
            actor=actor,
            reason=f"stable {bad} cannot be served; {target} restored ({reason})",
            evidence={"unservable_stable": bad, "restored_stable": target},
            expected_revision=state.revision,
        )

    before, saved = compare_and_swap(
        routing.load,
        decide,
        lambda _, change: routing.transition(change),
        operation="routing.restore_stable",
    )
    if saved is None:
        return before, None
    if catalog is not None:
        record_decision(catalog, saved, before=before, event_type="release_transition")
    log.info("stable %s cannot be served: %s restored as stable", before.stable, saved.stable)
    return saved, saved.stable
