"""Which golden set a workload is gated and evaluated on: its entry in
``FLYWHEEL_REWARD__GOLDEN_SETS``, else a folder named after it in the shared set's folder,
else the shared set as it is (its items scored by their own workload's verifier); and which
version a workload's training starts from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.errors import UnknownWorkload
from infra.routing import RoutingState, WorkloadRelease, save_state
from infra.serving import models
from infra.settings import RewardSettings
from infra.store import LocalStore
from tasks.golden import own_golden_path, settings_golden
from tasks.train.checkpoints import pick_base_version
from tasks.train.pairs import GoldenFilter

CONFIGURED = ("support", "sql", "router")
WORKLOADS = {"workloads": CONFIGURED}


def _write(path: Path, *ids: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"item_id": i, "question": f"q {i}?", "reference": "r"} for i in ids]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_workload_has_its_setting_else_its_folder_else_the_shared_set(tmp_path: Path) -> None:
    shared = tmp_path / "golden"
    _write(shared / "main.jsonl", "m1", "m2")
    _write(shared / "sql" / "sql.jsonl", "s1")
    support = _write(tmp_path / "support.jsonl", "h1")
    reward = RewardSettings(golden=shared, golden_sets={"support": support})

    assert own_golden_path(reward, "support", workloads=CONFIGURED) == support
    assert own_golden_path(reward, "sql", workloads=CONFIGURED) == shared / "sql"
    assert own_golden_path(reward, "router", workloads=CONFIGURED) is None
    assert own_golden_path(reward, "default", workloads=CONFIGURED) is None
    assert [(i.item_id, i.workload) for i in settings_golden(reward, "support", **WORKLOADS)] == [
        ("h1", "support")
    ]
    assert [(i.item_id, i.workload) for i in settings_golden(reward, "sql", **WORKLOADS)] == [
        ("s1", "sql")
    ]
    # no set of its own: the shared set, scored as the shared release's (its own verifier)
    assert [(i.item_id, i.workload) for i in settings_golden(reward, "router", **WORKLOADS)] == [
        ("m1", "default"),
        ("m2", "default"),
    ]
    assert [i.item_id for i in settings_golden(reward)] == ["m1", "m2"]  # a subfolder is not read


def test_a_workload_that_is_not_configured_has_no_golden_path(tmp_path: Path) -> None:
    """A name FLYWHEEL_WORKLOADS does not list is refused before any path is built from it:
    ``../x`` would reach a folder beside the golden set, ``sql`` its folder inside it."""
    shared = tmp_path / "golden"
    _write(shared / "main.jsonl", "m1")
    _write(shared / "sql" / "sql.jsonl", "s1")
    _write(tmp_path / "x" / "planted.jsonl", "p1")
    reward = RewardSettings(golden=shared)

    for name in ("../x", "sql"):
        with pytest.raises(UnknownWorkload, match="is not configured") as info:
            settings_golden(reward, name, workloads=["support"])
        assert "\n" not in str(info.value) and "FLYWHEEL_WORKLOADS" in str(info.value)
        with pytest.raises(UnknownWorkload):
            GoldenFilter.from_settings(reward, name, workloads=["support"])
    assert [i.item_id for i in settings_golden(reward, "sql", workloads=["sql"])] == ["s1"]


def test_a_workload_trains_from_its_own_stable_version_else_the_shared_one(
    tmp_path: Path,
) -> None:
    store = LocalStore(str(tmp_path / "store"))
    for version in ("v0", "v1"):
        weights = _write(tmp_path / version / "config.json", "x")
        models.publish_model_dir(store, version, weights.parent)
    state = RoutingState(stable="v0", workloads={"sql": WorkloadRelease(stable="v1")})
    save_state(store, state)

    assert pick_base_version(store) == "v0"
    assert pick_base_version(store, "sql") == "v1"
    assert pick_base_version(store, "support") == "v0"  # no release of its own yet
