"""A client for the gateway's admin API (bearer token), used by the rollback flow: the gateway
takes the candidate away in memory first (its fast path), then writes the state and the audit
event itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from infra.errors import ConfigError, ReleaseError
from infra.gateway.state import RoutingState

if TYPE_CHECKING:
    from infra.settings import Settings


class GatewayAdmin:
    def __init__(self, url: str, token: str, *, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        self.timeout_s = timeout_s

    @classmethod
    def from_settings(cls, settings: Settings, url: str | None = None) -> GatewayAdmin | None:
        """The admin client for ``url`` (default ``FLYWHEEL_GATEWAY__URL``); None when no URL.

        Raises:
            ConfigError: a URL is set but no admin token.
        """
        url = url or settings.gateway.url
        if not url:
            return None
        token = settings.gateway.admin_token
        if token is None or not token.get_secret_value():
            raise ConfigError(
                "FLYWHEEL_GATEWAY__URL is set but FLYWHEEL_GATEWAY__ADMIN_TOKEN is not: "
                "the gateway's admin API needs the token"
            )
        return cls(url, token.get_secret_value())

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            resp = httpx.request(
                method, self.url + path, json=body, headers=self._headers, timeout=self.timeout_s
            )
        except httpx.HTTPError as exc:
            raise ReleaseError(f"gateway admin API unreachable: {type(exc).__name__}") from exc
        if resp.status_code in (401, 403):
            raise ConfigError("the gateway refused the admin token (FLYWHEEL_GATEWAY__ADMIN_TOKEN)")
        if resp.status_code >= 400:
            raise ReleaseError(f"gateway admin API {path}: HTTP {resp.status_code}")
        return resp.json()

    def rollback(self, *, reason: str, actor: str) -> tuple[bool, RoutingState]:
        """(whether anything was rolled back, the gateway's state after).

        Raises:
            ReleaseError: the gateway did not answer or failed (retriable).
            ConfigError: the token was refused.
        """
        data = self._call("POST", "/admin/rollback", {"reason": reason[:2000], "actor": actor})
        return bool(data["rolled_back"]), RoutingState.model_validate(data["state"])

    def state(self) -> RoutingState:
        return RoutingState.model_validate(self._call("GET", "/admin/state"))
