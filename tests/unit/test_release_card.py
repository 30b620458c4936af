"""The model card follows the release: the gate's result and every stage of the version."""

from __future__ import annotations

from pathlib import Path

import yaml

from infra.routing import RoutingState
from infra.routing.state import apply_rollback, record_transition
from infra.serving import models
from infra.store import LocalStore
from tasks.release.machine.card import update_card

GATE = {
    "decision": "pass",
    "baseline": "v0",
    "n": 200,
    "mean_diff": 0.12,
    "p_value": 0.001,
    "ci": [0.08, 0.16],
    "reasons": ["candidate better"],
    "report": "gates/v1/report.json",
    "run_id": "not kept",
}


def _published(tmp_path: Path) -> LocalStore:
    store = LocalStore(tmp_path / "store")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model_card.yaml").write_text(yaml.safe_dump({"version": "v1", "model": "m"}))
    models.publish_model_dir(store, "v1", model)
    return store


def _card(store: LocalStore) -> dict:  # type: ignore[type-arg]
    return dict(yaml.safe_load(store.get("models/v1/model_card.yaml")))


def test_the_card_gains_the_gate_and_each_stage_as_the_release_moves(tmp_path: Path) -> None:
    store = _published(tmp_path)
    state = RoutingState(stable="v0")
    state = record_transition(
        state, to_phase="gating", actor="release", reason="begin", candidate="v1"
    )
    update_card(store, "v1", state=state)
    state = record_transition(state, to_phase="shadow", actor="release", reason="gate passed")
    update_card(store, "v1", state=state, gate=GATE)
    assert _card(store)["release"]["current"] == "shadow"

    state = record_transition(
        state, to_phase="canary", actor="release", reason="shadow ok", weight=5.0
    )
    state = apply_rollback(state, reason="alert HighErrorRate", actor="alertmanager")
    assert state is not None
    update_card(store, "v1", state=state)

    card = _card(store)
    assert card["model"] == "m"  # the trained card is kept
    release = card["release"]
    assert release["gate"]["decision"] == "pass" and release["gate"]["ci"] == [0.08, 0.16]
    assert "run_id" not in release["gate"]
    stages = [s["stage"] for s in release["stages"]]
    assert stages == ["gating", "shadow", "canary", "rolled_back"]
    assert release["stages"][-1]["reason"] == "alert HighErrorRate"
    assert release["stages"][2]["weight"] == 5.0
    assert release["current"] == "rolled_back"
    # the version still fetches: the card is the one file allowed to change after publication
    fetched = models.fetch_model(store, "v1", tmp_path / "cache")
    assert (fetched / "config.json").is_file()


def test_a_promotion_is_recorded_and_a_version_without_card_is_left_alone(tmp_path: Path) -> None:
    store = _published(tmp_path)
    state = record_transition(
        RoutingState(stable="v0"), to_phase="canary", actor="r", reason="x", candidate="v1"
    )
    state = record_transition(
        state, to_phase="promoted", actor="person", reason="looks good", stable="v1", candidate=None
    )
    update_card(store, "v1", state=state)
    assert [s["stage"] for s in _card(store)["release"]["stages"]] == ["canary", "promoted"]
    assert update_card(store, "v9", state=state) is None
