"""The OpenAI-compatible gateway: routing (stable / shadow / canary), tracing, metrics, admin.

The routing state itself lives in :mod:`infra.routing`; the app and server helpers are loaded
lazily so that importing this package stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infra.gateway.app import create_app
    from infra.gateway.parts import Intervals
    from infra.gateway.serve import GatewayHandle, serve_gateway, start_background_gateway

__all__ = [
    "GatewayHandle",
    "Intervals",
    "create_app",
    "serve_gateway",
    "start_background_gateway",
]

_LAZY = {
    "create_app": "infra.gateway.app",
    "Intervals": "infra.gateway.parts",
    "GatewayHandle": "infra.gateway.serve",
    "serve_gateway": "infra.gateway.serve",
    "start_background_gateway": "infra.gateway.serve",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'infra.gateway' has no attribute {name!r}")
