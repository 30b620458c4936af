"""The gateway's routes, one module per concern, each an :class:`~fastapi.APIRouter` of plain
functions that reach the gateway through ``app.state.parts`` (:mod:`infra.gateway.parts`):

- :mod:`~infra.gateway.routes.openai`: ``POST /v1/chat/completions``, ``GET /v1/models``;
- :mod:`~infra.gateway.routes.feedback`: ``POST /v1/feedback``;
- :mod:`~infra.gateway.routes.health`: ``/healthz``, ``/livez``, the public ``/metrics``, and
  ``/admin/metrics`` (bearer token);
- :mod:`~infra.gateway.routes.admin`: ``/admin/state``, ``/admin/rollback`` (bearer token),
  and what ``/admin/*`` answers on the public listener;
- :mod:`~infra.gateway.routes.alerts`: ``POST /admin/alerts``, the Alertmanager webhook;
- :mod:`~infra.gateway.routes.consent`: ``POST /admin/consent``;
- :mod:`~infra.gateway.routes.keys`: ``/admin/keys`` (client API keys);
- :mod:`~infra.gateway.routes.openai`'s :data:`~infra.gateway.routes.openai.admin_router`:
  ``POST /v1/chat/completions`` on the admin listener (the admin token; any version by name).

:data:`PUBLIC` are the public listener's routers, :data:`ADMIN` the admin listener's, in the
order they are matched.
"""

from __future__ import annotations

from fastapi import APIRouter

from infra.gateway.routes import admin, alerts, consent, feedback, health, keys, openai

PUBLIC: tuple[APIRouter, ...] = (openai.router, feedback.router, health.router, admin.elsewhere)
ADMIN: tuple[APIRouter, ...] = (
    admin.router,
    alerts.router,
    consent.router,
    keys.router,
    health.admin_router,
    openai.admin_router,
)
