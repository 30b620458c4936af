"""Erasure reaching the models (issue 29), the logic without services: the role each reached
version had, which cases stay pending, retirement through the routing state (never routed,
released, promoted, resumed or restored again, even forced), unloading, the rollback target,
and the lines ``flywheel erasure-status`` prints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deployments.erasure_commands import langfuse_line, status_fields, step_lines
from infra.errors import ControlRefused, RejectedVersion
from infra.routing import (
    RoutingState,
    StateChange,
    StoreRouting,
    apply_change,
    record_transition,
    save_state,
)
from infra.serving.models import ServableVersions
from infra.store import LocalStore
from tasks.governance.reach import list_cases, new_case, role_of, save_case
from tasks.governance.replacement import retire_versions, rollback_target
from tasks.release.machine import controls, machine, transitions
from tasks.release.machine.adapters import unload_unrouted
from tasks.release.machine.restore import restore_servable_stable

RECEIPT = "ab" * 32
NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)


def promoted(state: RoutingState, version: str) -> RoutingState:
    """``state`` after ``version`` was promoted (as the release flow records it)."""
    new = record_transition(
        state,
        to_phase="promoted",
        actor="t",
        reason="promoted",
        evidence={"previous_stable": state.stable},
        stable=version,
        candidate=None,
    )
    new.history[-1].candidate = version
    return new


def serving_v2() -> RoutingState:
    """v0 -> v1 -> v2 promoted in turn; v3 in canary."""
    state = promoted(promoted(RoutingState(stable="v0"), "v1"), "v2")
    return state.model_copy(update={"candidate": "v3", "phase": "canary", "weight": 5.0})


def test_roles_stable_candidate_baking_archived_retired() -> None:
    state = serving_v2().model_copy(update={"retired": ["v0"]})
    promoted_at = state.history[-1].at
    roles = {v: role_of(state, v, bake_s=600, at=promoted_at) for v in ("v0", "v1", "v2", "v3")}
    assert roles == {"v0": "retired", "v1": "baking", "v2": "stable", "v3": "candidate"}
    later = promoted_at + timedelta(hours=1)
    assert role_of(state, "v1", bake_s=600, at=later) == "archived"


def test_a_case_is_pending_only_while_a_version_that_saw_the_user_serves() -> None:
    state = serving_v2()
    reached = {"v1": ("time-travel", "v0"), "v2": ("trained from v1", "v1")}
    stores = {"tables": {"training_examples": 3}, "langfuse": {"requested": 2, "confirmed": 0}}
    case = new_case(
        receipt=RECEIPT, reached=reached, state=state, bake_s=0, deadline_days=7, stores=stores
    )
    assert case.status == "pending" and case.versions["v2"].role == "stable"
    assert case.versions["v2"].evidence == "trained from v1"
    assert case.deadline_at - case.requested_at == timedelta(days=7)
    archived = new_case(
        receipt=RECEIPT,
        reached={"v1": ("lineage.json", "v0")},
        state=state,
        bake_s=0,
        deadline_days=7,
        stores={},
    )
    assert archived.status == "done"  # nothing that serves saw the user: retired at once
    nobody = new_case(
        receipt=RECEIPT, reached={}, state=state, bake_s=0, deadline_days=7, stores={}
    )
    assert nobody.status == "done" and "no model version" in nobody.steps[-1].detail
    again = new_case(
        receipt=RECEIPT,
        reached={"v1": ("lineage.json", "v0")},
        state=state.model_copy(update={"retired": ["v1"]}),
        bake_s=0,
        deadline_days=7,
        stores={},
    )
    assert again.versions["v1"].status == "retired" and again.serving() == []


def test_retired_versions_are_never_routed_released_promoted_or_restored(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path / "store")
    save_state(store, promoted(RoutingState(stable="v0"), "v2"))
    routing = StoreRouting(store)
    state = retire_versions(
        routing, None, {"v1"}, receipts=[RECEIPT], actor="t", reason="erasure", subject="v2"
    )
    assert state.retired == ["v1"] and state.stable == "v2" and state.phase == "promoted"
    with pytest.raises(RejectedVersion, match="retired"):  # the gateway's contract
        apply_change(state, StateChange(candidate="v1", weight=10, force=True))
    with pytest.raises(RejectedVersion, match="retired"):
        apply_change(state, StateChange(stable="v1"))
    assert machine.plan_release(state, "v1", force=True) == "retired"
    with pytest.raises(RejectedVersion, match="never released"):
        transitions.begin_release(routing, None, "v1", actor="t", force=True)
    why = controls.retired_refusal(state, "v1")
    assert why and "can never be released" in why and "erasure-status" in why
    assert controls.release_status(routing)["retired"] == ["v1"]
    # a held retired candidate (an old state) is neither promoted nor resumed
    held = state.model_copy(update={"candidate": "v1", "phase": "held"})
    save_state(store, held)
    versions = ServableVersions(store, frozenset({"v0", "v1", "v2"}))
    refusal = controls.promotion_refusal(held, versions=versions, force=True, reason="x")
    assert refusal and "retired" in refusal
    with pytest.raises(ControlRefused, match="retired"):
        controls.resume(routing, None, actor="t")


def test_restoring_a_servable_stable_skips_retired_versions(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    state = promoted(promoted(RoutingState(stable="v0"), "v1"), "v2")
    save_state(store, state.model_copy(update={"retired": ["v1"]}))
    versions = ServableVersions(store, frozenset({"v0", "v1"}))  # v2 cannot be served
    restored, target = restore_servable_stable(
        StoreRouting(store), None, versions=versions, actor="t", reason="x"
    )
    assert target == "v0" and restored.stable == "v0"


def test_a_rollback_during_the_bake_period_never_returns_to_a_retired_version() -> None:
    from infra.routing import bake_target

    state = promoted(promoted(RoutingState(stable="v0"), "v1"), "v2")
    assert bake_target(state, bake_s=3600) == "v1"
    assert bake_target(state.model_copy(update={"retired": ["v1"]}), bake_s=3600) is None


def test_rollback_target_is_the_newest_version_that_never_saw_the_user() -> None:
    state = promoted(promoted(promoted(RoutingState(stable="v0"), "v1"), "v2"), "v3")
    assert rollback_target(state, avoid={"v3", "v2"}, servable=lambda v: True) == "v1"
    assert rollback_target(state, avoid={"v3", "v1"}, servable=lambda v: v != "v2") == "v0"
    assert rollback_target(state, avoid={"v3", "v2", "v1", "v0"}, servable=bool) is None


class Server:
    base_version = "base"

    def __init__(self, served: list[str]) -> None:
        self.loaded = list(served)

    def served(self) -> list[str]:
        return list(self.loaded)

    def unload(self, version: str) -> None:
        self.loaded.remove(version)


def test_a_retired_version_is_unloaded_at_once_even_while_baking() -> None:
    state = promoted(promoted(RoutingState(stable="v0"), "v1"), "v2")
    server = Server(["v1", "v2"])
    assert unload_unrouted(server, state, bake_s=3600) == []  # v1 bakes for a rollback
    retired = state.model_copy(update={"retired": ["v1"]})
    assert unload_unrouted(server, retired, bake_s=3600) == ["v1"]


def test_erasure_status_lines(tmp_path: Path) -> None:
    state = promoted(RoutingState(stable="v0"), "v1")
    stores = {
        "tables": {"training_examples": 6, "consent": 0},
        "langfuse": {"requested": 4, "confirmed": 1},
    }
    case = new_case(
        receipt=RECEIPT,
        reached={"v1": ("time-travel", "v0")},
        state=state,
        bake_s=0,
        deadline_days=7,
        stores=stores,
    )
    store = LocalStore(tmp_path / "store")
    save_case(store, case)
    assert [c.receipt for c in list_cases(store)] == [RECEIPT]
    fields = status_fields(case, at=case.requested_at + timedelta(days=8))
    assert fields["status"].startswith("pending (deadline") and "OVERDUE" in fields["status"]
    assert fields["langfuse"] == "requested 4 / confirmed 1 (read-back pending)"
    assert fields["tables"] == "training examples 6, consent 0"
    assert fields["v1"].startswith("stable when requested (time-travel); now affected")
    assert langfuse_line({"requested": 2, "confirmed": 2}) == "requested 2 / confirmed 2"
    lines = step_lines(case)
    assert len(lines) == len(case.steps) and "reached" in lines[-1] and "v1" in lines[-1]
    assert "alice" not in case.model_dump_json()


def test_scrubbing_a_models_lineage_keeps_the_model_fetchable(tmp_path: Path) -> None:
    """forget-user rewrites lineage.json without the user's key; the version's manifest
    follows, so the model still loads (before: "lineage.json does not match its hash")."""
    import json

    from infra.serving.models import fetch_model, publish_model_dir
    from tasks.governance.erasure import scrub_objects

    key = "cd" * 32
    folder = tmp_path / "v1"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"w")
    (folder / "lineage.json").write_text(json.dumps({"data": {"user_keys": [key, "ef" * 32]}}))
    store = LocalStore(tmp_path / "store")
    publish_model_dir(store, "v1", folder)

    rewritten, _ = scrub_objects(store, key=key, salt="s", trace_ids=set(), skip_prefix=None)

    assert rewritten == 1
    path = fetch_model(store, "v1", tmp_path / "cache")
    assert key not in (path / "lineage.json").read_text()


def test_langfuse_deletes_count_as_requested_until_read_back(tmp_path: Path) -> None:
    from tasks.governance.reach import record_langfuse_confirmed

    store = LocalStore(tmp_path / "store")
    case = new_case(
        receipt=RECEIPT,
        reached={},
        state=RoutingState(),
        bake_s=0,
        deadline_days=7,
        stores={"langfuse": {"requested": 3, "confirmed": 0}},
    )
    save_case(store, case)
    assert status_fields(case)["langfuse"] == "requested 3 / confirmed 0 (read-back pending)"
    case = record_langfuse_confirmed(store, RECEIPT, 3)
    assert status_fields(case)["langfuse"] == "requested 3 / confirmed 3"
    assert case.steps[-1].step == "confirmed" and case.steps[-1].subject == "langfuse"
