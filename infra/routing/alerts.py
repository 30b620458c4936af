"""Which Alertmanager alerts a rollback acts on: firing alerts naming the candidate (or, during
the bake period after a promotion, the promoted version), each fingerprint once per release.
An alert acts on one workload's release: the one its ``workload`` label names, else the
workload whose own candidate its ``model`` label names, else the shared release. The rollback
run the gateway then asks Prefect for names that release (:func:`rolled_back_release`)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any, TypedDict

from infra.routing.state import RoutingState, bake_target, fingerprint_key, own_workload


class MatchedAlert(TypedDict):
    """A firing Alertmanager alert a rollback acts on, as its evidence records it."""

    alertname: str | None
    fingerprint: str
    labels: dict[str, str]  # the alert's labels, as Alertmanager sent them
    startsAt: str | None


def alert_target(state: RoutingState, *, bake_s: float) -> str | None:
    """The version an alert may roll back: the candidate, or the version
    promoted less than ``bake_s`` ago (its previous stable still loaded); None otherwise."""
    if state.candidate is not None:
        return state.candidate
    if bake_target(state, bake_s=bake_s, now=datetime.now(UTC)) is not None:
        return state.stable
    return None


def alerts_by_workload(state: RoutingState, alerts: list[Any]) -> dict[str | None, list[Any]]:
    """``alerts`` grouped by the workload whose release each acts on (None: the shared one);
    at least one group, so an empty webhook still gets an answer."""
    own = {w.candidate: name for name, w in state.workloads.items() if w.candidate}
    groups: dict[str | None, list[Any]] = {}
    for alert in alerts:
        labels = alert.get("labels") if isinstance(alert, dict) else None
        labels = labels if isinstance(labels, dict) else {}
        named = labels.get("workload")
        model = labels.get("model") or labels.get("version")
        workload = own_workload(str(named)[:128]) if named else own.get(model) if model else None
        groups.setdefault(workload, []).append(alert)
    return groups or {None: []}


def match_alerts(
    state: RoutingState, alerts: list[Any], target: str | None
) -> tuple[list[MatchedAlert], int]:
    """The firing alerts naming ``target`` not yet acted on in ``state``'s release, and how
    many were already acted on (duplicates)."""
    seen = set(state.alert_fingerprints)
    matched: list[MatchedAlert] = []
    duplicates = 0
    for alert in alerts:
        if not isinstance(alert, dict) or alert.get("status") != "firing":
            continue
        labels = alert.get("labels") or {}
        fingerprint = str(alert.get("fingerprint") or _fingerprint(labels))
        if fingerprint_key(state, fingerprint) in seen:
            duplicates += 1
            continue
        named = labels.get("model") or labels.get("version")
        if target is not None and named == target:
            seen.add(fingerprint_key(state, fingerprint))
            matched.append(
                {
                    "alertname": labels.get("alertname"),
                    "fingerprint": fingerprint,
                    "labels": labels,
                    "startsAt": alert.get("startsAt"),
                }
            )
    return matched, duplicates


def rolled_back_release(
    saved: RoutingState, *, before: RoutingState, workload: str | None
) -> dict[str, str]:
    """The release a rollback written as ``saved`` (over ``before``) acted on, as the rollback
    flow's parameters: ``version`` (the candidate or promoted version rolled back),
    ``release_id`` and ``workload``, each only when set. A rollback run naming them changes
    nothing once another release is current, however late it starts."""
    view = saved.release_of(workload)
    named = {
        "version": view.history[-1].candidate if view.history else None,
        "release_id": before.release_of(workload).release_id,
        "workload": own_workload(workload),
    }
    return {k: v for k, v in named.items() if v is not None}


def _fingerprint(labels: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
