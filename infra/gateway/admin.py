"""Admin API (bearer token): routing state, manual rollback, and the Alertmanager webhook (the
work; the routes are :mod:`infra.gateway.routes.admin` and :mod:`~infra.gateway.routes.alerts`).
It is served on the admin listener only (``FLYWHEEL_GATEWAY__ADMIN_HOST/ADMIN_PORT``), never on
the public one, and the gateway refuses to start with a placeholder or short token.

The rollback fast path changes the in-memory routing first (the candidate stops getting traffic
within the request), then writes ``deploy/state.json`` (retried through :mod:`infra.retries`),
then, in the background, the audit event and the request to Prefect to run the ``rollback``
deployment. Neither the audit log nor Prefect can delay or prevent the rollback.

A decision counts only once it is durably written: an alert's fingerprint is stored with the
rolled-back state, under the release it acted on (so the same alert in the next release acts
again), and a webhook whose state write failed answers 503 without remembering the alert, so
Alertmanager's retry rolls back. During the bake period after a promotion, an alert naming the
promoted version rolls back to the previous stable version.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Unpack

from fastapi import HTTPException, Request
from pydantic import BaseModel, Field

from infra.cas import DURABLE
from infra.errors import (
    RejectedVersion,
    ReleaseInterrupted,
    StateConflict,
    TransientError,
)
from infra.routing import (
    Rollback,
    RoutingState,
    StateChange,
    StoreRouting,
    apply_rollback,
    record_rollback,
)
from infra.routing.alerts import (
    alert_target,
    alerts_by_workload,
    match_alerts,
    rolled_back_release,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.gateway.cohorts import StateWatcher
    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

ADMIN_OFF = "admin API disabled: set FLYWHEEL_GATEWAY__ADMIN_TOKEN to enable it"


class RollbackRequest(BaseModel):
    """The body of ``POST /admin/rollback``: why, who, and the release it is about (unset:
    whatever is current; ``candidate_only``: never undo a promotion)."""

    reason: str = Field(default="manual rollback", max_length=2000)
    actor: str = Field(default="admin", max_length=200)
    evidence: dict[str, Any] = {}
    version: str | None = Field(default=None, max_length=200)
    release_id: str | None = Field(default=None, max_length=200)
    candidate_only: bool = False
    workload: str | None = Field(default=None, min_length=1, max_length=128)  # None: shared


class Admin:
    """Admin actions; a rollback's audit event and ``on_rollback(reason, **release)`` (the
    release rolled back: :func:`rolled_back_release`) run in the background."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: ObjectStore,
        watcher: StateWatcher,
        catalog: Catalog | None = None,
        on_rollback: Callable[..., None] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.routing = StoreRouting(store, bake_s=settings.model_server.bake_s)
        self.watcher = watcher
        self._catalog = catalog
        self.on_rollback = on_rollback or (
            lambda reason, **release: trigger_prefect_rollback(settings, reason, **release)
        )
        self._lock = asyncio.Lock()
        self._catalog_lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        # (state before, state set locally) of a rollback applied here but not yet written
        self._unwritten: tuple[RoutingState, RoutingState] | None = None

    def catalog(self) -> Catalog:
        """The audit catalog, opened on first use (``open_catalog`` retries a first use racing
        another process; a failure here is tried again at the next use)."""
        from infra.catalog import get_table, open_catalog

        with self._catalog_lock:
            if self._catalog is None:
                catalog = open_catalog(self.settings)
                get_table(catalog, "audit_log")  # created now, not during a rollback
                self._catalog = catalog
            return self._catalog

    def warm_up(self) -> None:
        """Open the audit catalog in the background so a rollback's audit event is quick."""
        if self.settings.gateway.admin_token is not None:
            self._background(self.catalog)

    @property
    def enabled(self) -> bool:
        """Whether an admin token is set (the admin API is off without one)."""
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

    def decided_state(self) -> RoutingState:
        """The state decisions are taken on: the routing in use, except while a rollback
        applied here is not yet written (its decision does not count yet: the state before it)."""
        state = self.watcher.state
        if self._unwritten is not None and state is self._unwritten[1]:
            return self._unwritten[0]
        self._unwritten = None
        return state

    async def rollback(self, **rollback: Unpack[Rollback]) -> tuple[bool, RoutingState]:
        """Roll back now and write it (retried); returns (whether anything was rolled back, the
        resulting state). Only then are the audit event and the rollback deployment asked for.
        ``workload``: that workload's release alone (None: the shared one).

        Raises:
            HTTPException: 503 when the state could not be written (nothing is remembered);
                409 ``stale`` when ``version`` / ``release_id`` name another release.
        """
        async with self._lock:
            self._apply_locally(rollback)
            try:
                saved, before = await asyncio.to_thread(
                    lambda: self.routing.persist_rollback(
                        policy=DURABLE, retry_on=(TransientError,), **rollback
                    )
                )
            except ReleaseInterrupted as exc:
                self._settle(exc.state)
                detail = {"conflict": "stale", "message": str(exc)}
                detail["state"] = exc.state.model_dump(mode="json")
                raise HTTPException(409, detail) from exc
            except Exception as exc:
                log.error("rollback applied in memory but the state was not written: %s", exc)
                raise HTTPException(
                    503,
                    "rolled back in this gateway, but deploy/state.json was not written: the "
                    "rollback is not recorded; retry",
                ) from exc
            self._settle(saved)
        if before is None:
            return False, saved
        workload = rollback.get("workload")
        self._background(
            lambda: record_rollback(self.catalog(), saved, before=before, workload=workload)
        )
        named = rolled_back_release(saved, before=before, workload=workload)
        self._background(lambda: self.on_rollback(rollback["reason"], **named))
        return True, saved

    def _apply_locally(self, rollback: Rollback) -> None:
        """The fast path: route nothing to the candidate on this worker at once (fingerprints
        are not remembered here: only the written state remembers them)."""
        current = self.decided_state()
        unremembered: Rollback = {**rollback, "fingerprints": None}
        try:
            local = apply_rollback(current, bake_s=self.routing.bake_s, **unremembered)
        except ReleaseInterrupted:
            return  # the write decides, on the stored state
        if local is not None:
            local.revision = current.revision + 1
            self._unwritten = (current, local)
            self.watcher.set_local(local, persisted=False)

    def _settle(self, stored: RoutingState) -> None:
        """Route by the state the store holds now."""
        self._unwritten = None
        self.watcher.set_local(stored, persisted=True)

    def _background(self, fn: Any) -> None:
        def run() -> None:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - never surfaces to the rollback
                log.error("background rollback step failed: %s: %s", type(exc).__name__, exc)

        thread = threading.Thread(target=run, name="gateway-rollback-bg", daemon=True)
        thread.start()
        self.threads = [t for t in self.threads if t.is_alive()] + [thread]

    def finish_background(self, timeout_s: float = 10.0) -> list[str]:
        """Wait (at most ``timeout_s`` in all) for the background steps of earlier rollbacks
        (their audit events, the request to Prefect): a gateway stopped right after a
        rollback must not drop them with its daemon threads. Returns the names of the steps
        still running at the deadline (logged)."""
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        left = [t.name for t in self.threads if t.is_alive()]
        if left:
            log.warning("%d background rollback step(s) still running at shutdown", len(left))
        self.threads = [t for t in self.threads if t.is_alive()]
        return left

    async def alerts(self, payload: Any) -> dict[str, Any]:
        """Handle an Alertmanager webhook (v4): firing alerts naming the candidate (or, during
        the bake period, the just-promoted version) roll it back, once per release. Each alert
        acts on one workload's release alone (:func:`~infra.routing.alerts.alerts_by_workload`),
        one rollback per workload."""
        alerts = payload.get("alerts") if isinstance(payload, dict) else None
        if not isinstance(alerts, list):
            raise HTTPException(400, "expected Alertmanager webhook JSON with an 'alerts' list")
        answers = [
            await self.workload_alerts(group, workload=workload)
            for workload, group in alerts_by_workload(self.decided_state(), alerts).items()
        ]
        if len(answers) == 1:
            return answers[0]
        stale = "; ".join(a["stale"] for a in answers if "stale" in a)
        merged = {
            "rolled_back": any(a["rolled_back"] for a in answers),
            "matched": sum(a["matched"] for a in answers),
            "duplicates": sum(a["duplicates"] for a in answers),
            "state": self.watcher.state.model_dump(mode="json"),
        }
        return merged | ({"stale": stale} if stale else {})

    async def workload_alerts(self, alerts: list[Any], *, workload: str | None) -> dict[str, Any]:
        """The alerts of one workload (None: the shared release) against its release."""
        state = self.decided_state().release_of(workload)
        target = alert_target(state, bake_s=self.routing.bake_s)
        matched, duplicates = match_alerts(state, alerts, target)
        rolled_back, stale = False, None
        if matched and target is not None:
            names = ", ".join(sorted({str(m["alertname"]) for m in matched}))
            try:
                rolled_back, state = await self.rollback(
                    reason=f"alert firing for {target}: {names}",
                    actor="alertmanager",
                    evidence={"alerts": matched},
                    fingerprints=[m["fingerprint"] for m in matched],
                    version=target,
                    release_id=state.release_id,
                    workload=workload,
                )
            except HTTPException as exc:
                if exc.status_code != 409:
                    raise
                stale, state = str(exc.detail.get("message")), self.watcher.state  # type: ignore[attr-defined]
        state = state.release_of(workload) if state.workload is None else state
        answer = {
            "rolled_back": rolled_back,
            "matched": len(matched),
            "duplicates": duplicates,
            "state": state.model_dump(mode="json"),
        }
        return answer | ({"stale": stale} if stale else {})

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


def trigger_prefect_rollback(
    settings: Settings,
    reason: str,
    *,
    version: str | None = None,
    release_id: str | None = None,
    workload: str | None = None,
) -> None:
    """Ask Prefect to run the rollback deployment (fire and forget) for the release rolled
    back (``version``, ``release_id``, ``workload``: parameters of the run, when given), when
    a Prefect API is configured; without one nothing happens (no ephemeral server is started
    for this)."""
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        log.info("no Prefect API configured: rollback deployment not triggered")
        return
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    named = {"version": version, "release_id": release_id, "workload": workload}
    try:
        run = run_deployment(
            name=settings.prefect_rollback_deployment,
            parameters={"reason": reason} | {k: v for k, v in named.items() if v},
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
