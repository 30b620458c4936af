"""The routing state through the gateway's admin API (bearer token, on the gateway's admin
listener): the gateway applies each change in memory at once and persists it through
:class:`~infra.routing.store.StoreRouting`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Unpack

import httpx

from infra.errors import (
    ConfigError,
    GatewayUnavailable,
    RejectedVersion,
    ReleaseError,
    ReleaseInterrupted,
    StateConflict,
)
from infra.http import tls
from infra.routing.state import Rollback, RoutingState, StateChange

if TYPE_CHECKING:
    from infra.settings import Settings


class GatewayRouting:
    """The gateway's admin API (bearer token): the gateway applies each change in memory at
    once and persists it through :class:`StoreRouting`."""

    name = "gateway"

    def __init__(self, url: str, token: str, *, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        self.timeout_s = timeout_s

    @classmethod
    def from_settings(cls, settings: Settings, url: str | None = None) -> GatewayRouting | None:
        """The admin client for the admin API at ``url`` (default
        ``FLYWHEEL_GATEWAY__ADMIN_URL``, else ``FLYWHEEL_GATEWAY__URL``'s host at
        ``FLYWHEEL_GATEWAY__ADMIN_PORT``); None when neither URL is set.

        Raises:
            ConfigError: a URL is set but no admin token.
        """
        url = url or settings.gateway.resolved_admin_url
        if not url:
            return None
        token = settings.gateway.admin_token
        if token is None or not token.get_secret_value():
            raise ConfigError(
                "FLYWHEEL_GATEWAY__URL is set but FLYWHEEL_GATEWAY__ADMIN_TOKEN is not: "
                "the gateway's admin API needs the token"
            )
        return cls(url, token.get_secret_value())

    def load(self) -> RoutingState:
        """The gateway's routing state."""
        return RoutingState.model_validate(self._call("GET", "/admin/state"))

    def transition(self, change: StateChange) -> RoutingState:
        """``POST /admin/state`` (see :class:`RoutingBackend`)."""
        body = change.model_dump(mode="json", exclude_unset=True)
        return RoutingState.model_validate(self._call("POST", "/admin/state", body))

    def rollback(self, **rollback: Unpack[Rollback]) -> tuple[bool, RoutingState]:
        """``POST /admin/rollback`` (see :class:`RoutingBackend`); the gateway writes the audit
        event."""
        body: dict[str, Any] = {
            "reason": rollback["reason"][:2000],
            "actor": rollback["actor"],
            "evidence": rollback.get("evidence") or {},
            "version": rollback.get("version"),
            "release_id": rollback.get("release_id"),
            "candidate_only": rollback.get("candidate_only", False),
        }
        workload = rollback.get("workload")
        if workload is not None:  # absent: a gateway without workloads answers as before
            body["workload"] = workload
        data = self._call("POST", "/admin/rollback", body)
        return bool(data["rolled_back"]), RoutingState.model_validate(data["state"])

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON answer; errors translated (see :class:`RoutingBackend`).

        Raises:
            GatewayUnavailable: no answer, or a 5xx (retriable).
            ConfigError: the token was refused.
        """
        try:
            resp = httpx.request(
                method,
                self.url + path,
                json=body,
                headers=self._headers,
                timeout=self.timeout_s,
                verify=tls(),
            )
        except httpx.HTTPError as exc:
            raise GatewayUnavailable(
                f"gateway admin API at {self.url} unreachable: {type(exc).__name__} "
                "(FLYWHEEL_GATEWAY__ADMIN_URL)"
            ) from exc
        if resp.status_code in (401, 403):
            raise ConfigError("the gateway refused the admin token (FLYWHEEL_GATEWAY__ADMIN_TOKEN)")
        if resp.status_code == 409:
            detail = resp.json().get("detail") or {}
            message = str(detail.get("message", detail)) if isinstance(detail, dict) else detail
            if isinstance(detail, dict) and detail.get("conflict") == "rejected":
                raise RejectedVersion(message)
            if isinstance(detail, dict) and detail.get("conflict") == "stale":
                raise ReleaseInterrupted(message, RoutingState.model_validate(detail["state"]))
            raise StateConflict(f"gateway admin API {path}: {message}")
        if resp.status_code >= 500:
            raise GatewayUnavailable(f"gateway admin API {path}: HTTP {resp.status_code}")
        if resp.status_code == 404:
            raise ConfigError(
                f"{self.url} has no admin API (HTTP 404): point FLYWHEEL_GATEWAY__ADMIN_URL at "
                "the gateway's admin port (FLYWHEEL_GATEWAY__ADMIN_PORT), not its public one"
            )
        if resp.status_code >= 400:
            raise ReleaseError(f"gateway admin API {path}: HTTP {resp.status_code} {resp.text}")
        return resp.json()
