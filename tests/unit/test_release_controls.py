"""A person's controls cannot take traffic down: a version nothing can serve is refused before
any transition, promote wants a gate pass (or a forced, reasoned, audited override), and a
rollback always leaves a stable version that can be served (local routing, no services)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.errors import ReleaseError, UnservableVersion
from infra.routing import RoutingState, StoreRouting, save_state
from infra.serving.models import ServableVersions, publish_model_dir
from infra.settings import GatewaySettings, ReleaseSettings, Settings
from infra.store import LocalStore
from tasks.release.gate.gate import Decision
from tasks.release.gate.report import gate_evidence
from tasks.release.machine import controls, machine, restore, transitions
from tests.helpers import gate_result

ROOT = Path(__file__).resolve().parents[2]
CFG = ReleaseSettings(canary_steps=(5, 100), shadow_fraction=0.2)
BETTER = ([0.0, 1.0] * 30, [1.0] * 60)
SAME = ([0.0, 1.0] * 30, [0.0, 1.0] * 30)


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    s = LocalStore(tmp_path / "store")
    save_state(s, RoutingState(stable="v0"))
    return s


@pytest.fixture
def routing(store: LocalStore) -> StoreRouting:
    return StoreRouting(store)


def publish(store: LocalStore, version: str, tmp_path: Path) -> None:
    folder = tmp_path / f"model-{version}"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"w")
    publish_model_dir(store, version, folder)


def versions(store: LocalStore, *names: str) -> ServableVersions:
    return ServableVersions(store, frozenset(names or ("v0", "v1", "v2")))


def gate(routing: StoreRouting, version: str, scores: tuple[list[float], list[float]]) -> None:
    result = gate_result(version, *scores, run_id="r")
    machine.apply_gate(
        routing, None, result, gate=gate_evidence(result, {}), policy=CFG, actor="flow"
    )


def test_unservable_version_is_named_with_the_versions_that_exist(
    store: LocalStore, tmp_path: Path
) -> None:
    publish(store, "v0", tmp_path)
    publish(store, "v1", tmp_path)
    (tmp_path / "store" / "models" / "v2").mkdir()  # a crashed upload: never complete
    (tmp_path / "store" / "models" / "v2" / "weights.bin").write_bytes(b"half")
    found = ServableVersions.from_settings(
        Settings(home=tmp_path, gateway=GatewaySettings(upstreams={"big": "http://x"})), store
    )
    assert [found.servable(v) for v in ("v0", "v1", "v2", "big", "../v0")] == [
        True,
        True,
        False,
        True,
        False,
    ]
    assert found.known() == ["v0", "v1", "big"]
    with pytest.raises(UnservableVersion) as err:
        found.require("v99")
    assert str(err.value) == "model version v99 does not exist; versions: v0, v1, big"
    empty = ServableVersions(LocalStore(tmp_path / "empty"))
    with pytest.raises(UnservableVersion, match="versions: none .run `flywheel bootstrap`"):
        empty.require("v0")


def test_promote_refuses_a_candidate_whose_gate_asked_for_review(routing: StoreRouting) -> None:
    transitions.begin_release(routing, None, "v1", actor="flow")
    gate(routing, "v1", SAME)
    held = routing.load()
    assert (held.phase, controls.gate_decision(held, "v1")) == ("held", "MANUAL_REVIEW")
    with pytest.raises(ReleaseError, match=r"has not passed the golden gate .*--force --reason"):
        controls.promote(routing, None, actor="person", versions=versions(routing.store))
    with pytest.raises(ReleaseError, match="needs a reason"):
        controls.promote(
            routing, None, actor="person", versions=versions(routing.store), force=True, reason=""
        )
    assert routing.load() == held  # nothing written
    state = controls.promote(
        routing,
        None,
        actor="person",
        versions=versions(routing.store),
        force=True,
        reason="read the report: the same answers",
    )
    assert (state.stable, state.candidate, state.phase) == ("v1", None, "promoted")
    last = state.history[-1]
    assert (last.actor, last.reason) == ("person", "read the report: the same answers")
    assert last.evidence == {"forced": True, "gate": "MANUAL_REVIEW", "previous_stable": "v0"}


def test_promote_after_a_gate_pass_needs_no_force(routing: StoreRouting) -> None:
    transitions.begin_release(routing, None, "v1", actor="flow")
    gate(routing, "v1", BETTER)
    assert controls.gate_decision(routing.load(), "v1") == Decision.PROCEED.value
    state = controls.promote(routing, None, actor="person", versions=versions(routing.store))
    assert state.stable == "v1" and "forced" not in state.history[-1].evidence


def test_a_gate_pass_of_an_earlier_release_does_not_count(routing: StoreRouting) -> None:
    transitions.begin_release(routing, None, "v1", actor="flow")
    gate(routing, "v1", BETTER)
    controls.abort(routing, None, actor="person")
    transitions.begin_release(routing, None, "v1", actor="person", force=True)  # gate not run
    before = routing.load()
    assert controls.gate_decision(before, "v1") is None
    with pytest.raises(ReleaseError, match=r"gate: no decision"):
        controls.promote(routing, None, actor="person", versions=versions(routing.store))
    assert routing.load() == before


def test_promote_never_makes_an_unservable_version_stable(routing: StoreRouting) -> None:
    save_state(
        routing.store, RoutingState(stable="v0", candidate="v99", phase="held"), force=True
    )  # what `release v99` used to leave behind
    before = routing.load()
    for force in (False, True):
        with pytest.raises(ReleaseError, match="v99 cannot be served .*versions: v0, v1, v2"):
            controls.promote(
                routing,
                None,
                actor="person",
                versions=versions(routing.store),
                force=force,
                reason="typo",
            )
    assert routing.load() == before


def test_rollback_restores_the_newest_earlier_servable_stable(routing: StoreRouting) -> None:
    for version in ("v1", "v2"):
        transitions.begin_release(routing, None, version, actor="flow")
        gate(routing, version, BETTER)
        controls.promote(routing, None, actor="person", versions=versions(routing.store))
    assert routing.load().stable == "v2"
    # v2's model is gone (its upstream removed): v1, stable before it, can still be served
    state, restored = restore.restore_servable_stable(
        routing, None, versions=versions(routing.store, "v0", "v1"), actor="oncall", reason="r"
    )
    assert (restored, state.stable, state.phase) == ("v1", "v1", "rolled_back")
    assert state.history[-1].evidence == {"unservable_stable": "v2", "restored_stable": "v1"}
    again = restore.restore_servable_stable(
        routing, None, versions=versions(routing.store, "v0", "v1"), actor="oncall", reason="r"
    )
    assert again == (state, None)  # servable: nothing changes


def test_rollback_skips_rejected_versions_and_says_when_nothing_can_serve(
    routing: StoreRouting,
) -> None:
    broken = RoutingState(stable="v5", rejected=["v0"])
    save_state(routing.store, broken, force=True)
    before = routing.load()
    with pytest.raises(UnservableVersion, match=r"stable version v5 cannot be served .*tried none"):
        restore.restore_servable_stable(
            routing, None, versions=versions(routing.store), actor="oncall", reason="r"
        )
    assert routing.load() == before
    save_state(routing.store, RoutingState(stable="v5"), force=True)
    state, restored = restore.restore_servable_stable(
        routing, None, versions=versions(routing.store), actor="oncall", reason="r"
    )
    assert (restored, state.stable) == ("v0", "v0")  # every routing state started at v0


def test_cli_release_of_a_missing_version_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYWHEEL_")}
    done = subprocess.run(
        [sys.executable, "-m", "deployments.cli", "release", "v99"],
        cwd=ROOT,
        env={**env, "FLYWHEEL_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "flywheel release: error: model version v99 does not exist; versions: none "
        "(run `flywheel bootstrap`)"
    ]
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "home" / "store" / "deploy").exists()  # routing state untouched
