"""The model card follows its release: ``models/<version>/model_card.yaml`` gains a ``release``
section with the gate's result (decision, reasons, report keys) and every deployment stage the
version went through (gating, shadow, canary steps, promoted, rolled back, held), each with
when, who and why, as the routing state recorded them.

The card is the one file of a published version that changes after publication
(:data:`infra.serving.models.MUTABLE`: its manifest hash is the trained card's). Stages accumulate:
the routing state's history is the source, and a stage already on the card stays there.
Updating a card never fails a release: a store error is logged and the release goes on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import yaml

from infra.errors import ObjectNotFound, StoreError
from infra.keys import model_prefix

if TYPE_CHECKING:
    from infra.routing import RoutingState
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

CARD = "model_card.yaml"


def stages_of(state: RoutingState, version: str) -> list[dict[str, Any]]:
    """The routing state's transitions that name ``version`` (as candidate, or as the stable
    version a promotion made it), oldest first."""
    out = []
    for t in state.history:
        if t.candidate != version and not (t.to_phase == "promoted" and state.stable == version):
            continue
        out.append(
            {
                "at": t.at.isoformat(),
                "stage": t.to_phase,
                "from": t.from_phase,
                "weight": t.weight,
                "actor": t.actor,
                "reason": t.reason,
            }
        )
    return out


def gate_summary(gate: dict[str, Any]) -> dict[str, Any]:
    """What the card keeps of the gate's evidence (:func:`tasks.release.gate.report.gate_evidence`)."""
    keep = (
        "decision",
        "baseline",
        "n",
        "mean_baseline",
        "mean_candidate",
        "mean_diff",
        "p_value",
        "ci",
        "reasons",
        "regressed_slices",
        "failed_checks",
        "report",
    )
    return {k: gate[k] for k in keep if k in gate}


def update_card(
    store: ObjectStore,
    version: str,
    *,
    state: RoutingState | None = None,
    gate: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Merge the gate's result and the stages in ``state`` into ``version``'s card; returns
    the card written, or None when the version has no card (not a trained version) or the
    store failed (logged)."""
    key = model_prefix(version) + CARD
    try:
        card = yaml.safe_load(store.get(key)) or {}
    except ObjectNotFound:
        return None
    except StoreError as exc:
        log.warning("model card of %s not updated: %s", version, exc)
        return None
    release: dict[str, Any] = dict(card.get("release") or {})
    if gate is not None:
        release["gate"] = gate_summary(gate)
    if state is not None:
        stages = list(release.get("stages") or [])
        seen = {(s["at"], s["stage"]) for s in stages}
        stages += [s for s in stages_of(state, version) if (s["at"], s["stage"]) not in seen]
        stages.sort(key=lambda s: str(s["at"]))
        release["stages"] = stages
        if stages:
            release["current"] = stages[-1]["stage"]
    card["release"] = release
    try:
        store.put(key, yaml.safe_dump(card, sort_keys=False).encode())
    except StoreError as exc:
        log.warning("model card of %s not updated: %s", version, exc)
        return None
    return dict(card)
