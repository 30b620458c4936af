"""Admin API (bearer token): routing state, manual rollback, and the Alertmanager webhook. It
is served on the admin listener only (``FLYWHEEL_GATEWAY__ADMIN_HOST/ADMIN_PORT``), never on
the public one, and the gateway refuses to start with a placeholder or short token.

The rollback fast path changes the in-memory routing first (the candidate stops getting traffic
within the request), then writes ``deploy/state.json``, then, in the background, the audit
event and the request to Prefect to run the ``rollback`` deployment. Neither the audit log nor
Prefect can delay or prevent the rollback.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, Field, SecretStr

from infra.errors import ConfigError, RejectedVersion, StateConflict
from infra.gateway.consent_api import add_consent_routes
from infra.routing import (
    RoutingState,
    StateChange,
    StoreRouting,
    apply_rollback,
    record_rollback,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.gateway.routing import StateWatcher
    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

ADMIN_OFF = "admin API disabled: set FLYWHEEL_GATEWAY__ADMIN_TOKEN to enable it"
MIN_TOKEN_CHARS = 32
_PLACEHOLDERS = ("changeme", "change-me", "change_me", "placeholder", "example", "your-")


def check_admin_token(token: SecretStr | None) -> None:
    """Refuse a placeholder or short admin token (unset or empty: the admin API is off).

    Raises:
        ConfigError: the token is a placeholder, repetitive, or under 32 characters.
    """
    value = token.get_secret_value() if token is not None else ""
    if not value:
        return
    how = "set a random one, e.g. `openssl rand -hex 32`"
    if any(p in value.lower() for p in _PLACEHOLDERS) or len(set(value)) < 8:
        raise ConfigError(f"FLYWHEEL_GATEWAY__ADMIN_TOKEN is a placeholder: {how}")
    if len(value) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"FLYWHEEL_GATEWAY__ADMIN_TOKEN has {len(value)} characters, the gateway needs at "
            f"least {MIN_TOKEN_CHARS}: {how}"
        )


MIN_SALT_CHARS = 16


def check_user_salt(salt: SecretStr | None) -> None:
    """Refuse a placeholder or short ``FLYWHEEL_USER_SALT`` (unset: one is generated). The salt
    keys user pseudonyms and signs trace ids: a guessable one undoes both.

    Raises:
        ConfigError: the salt is a placeholder, repetitive, or under 16 characters.
    """
    value = salt.get_secret_value() if salt is not None else ""
    if salt is None:
        return
    how = "set a random one, e.g. `openssl rand -hex 32`, or unset it to have one generated"
    if any(p in value.lower() for p in _PLACEHOLDERS) or len(set(value)) < 8:
        raise ConfigError(f"FLYWHEEL_USER_SALT is a placeholder: {how}")
    if len(value) < MIN_SALT_CHARS:
        raise ConfigError(
            f"FLYWHEEL_USER_SALT has {len(value)} characters, the gateway needs at least "
            f"{MIN_SALT_CHARS}: {how}"
        )


class RollbackRequest(BaseModel):
    reason: str = Field(default="manual rollback", max_length=2000)
    actor: str = Field(default="admin", max_length=200)
    evidence: dict[str, Any] = {}


class Admin:
    def __init__(
        self,
        *,
        settings: Settings,
        store: ObjectStore,
        watcher: StateWatcher,
        catalog: Catalog | None = None,
        on_rollback: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.routing = StoreRouting(store)  # the audit event is written in the background
        self.watcher = watcher
        self._catalog = catalog
        # runs in a background thread after each rollback, with its reason
        self.on_rollback = on_rollback or (
            lambda reason: trigger_prefect_rollback(settings, reason)
        )
        self._lock = asyncio.Lock()
        self._catalog_lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def catalog(self, attempts: int = 4) -> Catalog:
        """The audit catalog, opened on first use; retried because a first use racing another
        process on a fresh SQLite catalog can fail once ("table ... already exists")."""
        from infra.catalog import get_table, open_catalog

        with self._catalog_lock:
            for attempt in range(attempts):
                if self._catalog is not None:
                    break
                try:
                    catalog = open_catalog(self.settings)
                    get_table(catalog, "audit_log")  # created now, not during a rollback
                    self._catalog = catalog
                except Exception as exc:
                    if attempt == attempts - 1:
                        raise
                    log.warning("opening the audit catalog failed (%s); retrying", exc)
                    time.sleep(0.5 * 2**attempt)
        assert self._catalog is not None
        return self._catalog

    def warm_up(self) -> None:
        """Open the audit catalog in the background so a rollback's audit event is quick."""
        if self.settings.gateway.admin_token is not None:
            self._background(self.catalog)

    @property
    def enabled(self) -> bool:
        token = self.settings.gateway.admin_token
        return token is not None and bool(token.get_secret_value())

    def _matches(self, given: str) -> bool:
        token = self.settings.gateway.admin_token
        return (
            token is not None
            and bool(given)
            and secrets.compare_digest(given.strip().encode(), token.get_secret_value().encode())
        )

    def shows_bearer(self, authorization: str) -> bool:
        """Whether an ``Authorization`` header's value is ``Bearer <admin token>`` (False while
        the admin API is off)."""
        scheme, _, given = authorization.partition(" ")
        return self.enabled and scheme.lower() == "bearer" and self._matches(given)

    def authorize(self, request: Request) -> None:
        """Let the request through with ``Authorization: Bearer <admin token>``.

        Raises:
            HTTPException: 503 while the admin API is off, 401 without the token.
        """
        if not self.enabled:
            raise HTTPException(503, ADMIN_OFF)
        if not self.shows_bearer(request.headers.get("authorization", "")):
            raise HTTPException(
                401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"}
            )

    async def rollback(
        self,
        *,
        reason: str,
        actor: str,
        evidence: dict[str, Any] | None = None,
        fingerprints: list[str] | None = None,
    ) -> tuple[bool, RoutingState]:
        """Roll back now; returns (whether anything was rolled back, the resulting state)."""
        async with self._lock:
            current = self.watcher.state
            local = apply_rollback(
                current, reason=reason, actor=actor, evidence=evidence, fingerprints=fingerprints
            )
            if local is not None:  # takes effect for the very next request
                local.revision = current.revision + 1
                self.watcher.set_local(local, persisted=False)
            try:
                saved, before = await asyncio.to_thread(
                    self.routing.persist_rollback,
                    reason=reason,
                    actor=actor,
                    evidence=evidence,
                    fingerprints=fingerprints,
                )
            except Exception as exc:
                log.error("rollback applied in memory but the state was not written: %s", exc)
                raise HTTPException(
                    503, "rolled back in this gateway, but deploy/state.json was not written"
                ) from exc
            self.watcher.set_local(saved, persisted=True)
        if before is None:
            return local is not None, saved
        self._background(lambda: record_rollback(self.catalog(), saved, before=before))
        self._background(lambda: self.on_rollback(reason))
        return True, saved

    def _background(self, fn: Any) -> None:
        def run() -> None:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - never surfaces to the rollback
                log.error("background rollback step failed: %s: %s", type(exc).__name__, exc)

        thread = threading.Thread(target=run, name="gateway-rollback-bg", daemon=True)
        thread.start()
        self.threads = [t for t in self.threads if t.is_alive()] + [thread]

    async def alerts(self, payload: Any) -> dict[str, Any]:
        """Handle an Alertmanager webhook (v4): firing alerts naming the candidate roll it back."""
        alerts = payload.get("alerts") if isinstance(payload, dict) else None
        if not isinstance(alerts, list):
            raise HTTPException(400, "expected Alertmanager webhook JSON with an 'alerts' list")
        state = self.watcher.state
        candidate = state.candidate
        seen = set(state.alert_fingerprints)
        matched: list[dict[str, Any]] = []
        duplicates = 0
        for alert in alerts:
            if not isinstance(alert, dict) or alert.get("status") != "firing":
                continue
            labels = alert.get("labels") or {}
            fingerprint = str(alert.get("fingerprint") or _fingerprint(labels))
            if fingerprint in seen:
                duplicates += 1
                continue
            named = labels.get("model") or labels.get("version")
            if candidate is not None and named == candidate:
                seen.add(fingerprint)
                matched.append(
                    {
                        "alertname": labels.get("alertname"),
                        "fingerprint": fingerprint,
                        "labels": labels,
                        "startsAt": alert.get("startsAt"),
                    }
                )
        rolled_back = False
        if matched:
            names = ", ".join(sorted({str(m["alertname"]) for m in matched}))
            rolled_back, state = await self.rollback(
                reason=f"alert firing for {candidate}: {names}",
                actor="alertmanager",
                evidence={"alerts": matched},
                fingerprints=[m["fingerprint"] for m in matched],
            )
        return {
            "rolled_back": rolled_back,
            "matched": len(matched),
            "duplicates": duplicates,
            "state": state.model_dump(mode="json"),
        }

    async def update(self, change: StateChange) -> RoutingState:
        """Apply one transition (compare-and-swap in the store); 409 on a revision conflict
        (``conflict: revision``) or a rejected version without ``force`` (``rejected``)."""
        async with self._lock:
            try:
                saved = await asyncio.to_thread(self.routing.transition, change)
            except RejectedVersion as exc:
                raise HTTPException(409, {"conflict": "rejected", "message": str(exc)}) from exc
            except StateConflict as exc:
                raise HTTPException(409, {"conflict": "revision", "message": str(exc)}) from exc
            self.watcher.set_local(saved, persisted=True)
            return saved


def _fingerprint(labels: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]


def trigger_prefect_rollback(settings: Settings, reason: str) -> None:
    """Ask Prefect to run the rollback deployment (fire and forget) when a Prefect API is
    configured; without one nothing happens (no ephemeral server is started for this)."""
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        log.info("no Prefect API configured: rollback deployment not triggered")
        return
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    try:
        run = run_deployment(
            name=settings.prefect_rollback_deployment,
            parameters={"reason": reason},
            timeout=0,
            as_subflow=False,
        )
    except ObjectNotFound:  # e.g. `flywheel run`: its release flow unloads the candidate itself
        log.warning(
            "rollback deployment %r is not on the Prefect API (`flywheel deploy` creates it): "
            "the routing state is rolled back; the rollback flow was not run",
            settings.prefect_rollback_deployment,
        )
        return
    log.info("requested Prefect rollback run %s", getattr(run, "id", "?"))


def admin_router(admin: Admin) -> APIRouter:
    router = APIRouter(prefix="/admin", dependencies=[Depends(admin.authorize)])

    @router.get("/state")
    async def get_state() -> dict[str, Any]:
        return admin.watcher.state.model_dump(mode="json")

    @router.post("/state")
    async def post_state(change: StateChange) -> dict[str, Any]:
        return (await admin.update(change)).model_dump(mode="json")

    @router.post("/rollback")
    async def post_rollback(body: RollbackRequest) -> dict[str, Any]:
        done, state = await admin.rollback(
            reason=body.reason, actor=body.actor, evidence=body.evidence or None
        )
        return {"rolled_back": done, "state": state.model_dump(mode="json")}

    @router.post("/alerts")
    async def post_alerts(request: Request) -> dict[str, Any]:
        try:
            payload = await request.json()
        except ValueError as exc:
            raise HTTPException(400, "body is not JSON") from exc
        return await admin.alerts(payload)

    add_consent_routes(
        router,
        catalog=admin.catalog,
        salt=admin.settings.salt,
        mode=admin.settings.consent_mode,
    )
    return router
