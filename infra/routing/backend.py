"""The one interface through which stages and flows read and change routing, and the choice
of its implementation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Unpack

from infra.routing.admin_api import GatewayRouting
from infra.routing.store import StoreRouting

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.routing.state import Rollback, RoutingState, StateChange
    from infra.settings import Settings
    from infra.store import ObjectStore


class RoutingBackend(Protocol):
    """Where stages and flows read and change the routing state."""

    name: str

    def load(self) -> RoutingState:
        """The current routing state."""
        ...

    def transition(self, change: StateChange) -> RoutingState:
        """Apply ``change`` atomically; returns the state written.

        Raises:
            StateConflict: the state is not at ``change.expected_revision`` any more (or
                changed during the write): reload, reapply, write again.
            RejectedVersion: the change routes traffic to a rejected version.
        """
        ...

    def rollback(self, **rollback: Unpack[Rollback]) -> tuple[bool, RoutingState]:
        """Take the candidate away now (weight 0, shadow 0, recorded as rejected) or, with no
        candidate and unless ``candidate_only``, undo a promotion still in its bake period
        (the previous stable is stable again, the promoted version rejected), and record the
        ``rollback`` audit event; returns (whether anything was rolled back, the state). The
        keywords are a :class:`~infra.routing.state.Rollback`: ``version`` / ``release_id``,
        the release the decision is about (None: the current); ``workload``, that workload's
        release alone (None: the shared one).

        Raises:
            ReleaseInterrupted: another release than the one named is current (nothing done).
        """
        ...


def open_routing(
    settings: Settings,
    store: ObjectStore,
    *,
    catalog: Catalog | None = None,
    gateway_url: str | None = None,
) -> RoutingBackend:
    """The gateway's admin API when its URL is known (``gateway_url``, the admin listener's
    URL, or ``FLYWHEEL_GATEWAY__ADMIN_URL``, or ``FLYWHEEL_GATEWAY__URL``'s host at
    ``FLYWHEEL_GATEWAY__ADMIN_PORT``), else the state object in ``store``.

    Raises:
        ConfigError: a gateway URL is set but no admin token.
    """
    gateway = GatewayRouting.from_settings(settings, gateway_url)
    if gateway is not None:
        return gateway
    return StoreRouting(store, catalog=catalog, bake_s=settings.model_server.bake_s)
