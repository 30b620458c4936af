"""The weekly flow per workload: a workload with enough curated rows is trained and released
as a release run named for it, one with too few is skipped with its count, one held does
not change another's routing, one failing does not stop the others, and traffic without
workload labels is one shared train-and-release as before. Training and the release are
stand-in flows (their own tests cover them); the counting, the routing and Prefect are real."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prefect import flow
from prefect.runtime import flow_run

import flows.weekly as weekly_flow
from flows.release import ReleaseOptions
from infra.catalog import append_rows, open_catalog
from infra.keys import window_id
from infra.routing import StateChange, load_state, open_routing, scoped
from infra.runtime import Runtime
from infra.settings import get_settings
from tasks.release.machine.outcome import ReleaseOutcome
from tasks.train.run import TrainRunResult

pytestmark = [pytest.mark.integration, pytest.mark.waits]  # mostly waits on the clock

HELD = {"router"}  # workloads whose stand-in release holds; the others promote
FAIL = {"boom"}  # workloads whose stand-in training raises


def _rows(workload: str | None, n: int) -> list[dict[str, Any]]:
    at = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return [
        {
            "trace_id": f"{workload}-{i}",
            "prompt_group": f"{workload}-g{i // 2}",
            "user_key": None,
            "question": "What is 2+3?",
            "contexts": [],
            "answer": "5",
            "reward": 0.9,
            "reward_config_hash": "rc",
            "eligible_as": "train",
            "window": window_id(at),
            "created_at": at,
            "workload": workload,
        }
        for i in range(n)
    ]


@flow(name="train")
def fake_train(
    method: str | None = None,
    max_steps: int | None = None,
    base_version: str | None = None,
    workload: str | None = None,
) -> TrainRunResult:
    """Stand-in train: a candidate named after the workload; raises for FAIL."""
    if workload in FAIL:
        raise RuntimeError("training crashed")
    version = f"v{len(workload or 'shared')}"
    return TrainRunResult(
        status="trained",
        message=f"trained ({flow_run.name})",
        train_run=str(flow_run.name),
        base_version="v0",
        method="dpo",
        pairs=3,
        version=version,
        workload=workload,
    )


@flow(name="release")
def fake_release(version: str, options: ReleaseOptions | None = None) -> ReleaseOutcome:
    """Stand-in release on the real routing state: promotes, or holds for HELD."""
    opts = options or ReleaseOptions()
    rt = Runtime.from_env()
    routing = scoped(open_routing(rt.settings, rt.store), opts.workload)
    held = opts.workload in HELD
    change = StateChange(
        candidate=version,
        phase="held" if held else "promoted",
        reason="test",
        actor="test",
        **({} if held else {"stable": version}),
    )
    routing.transition(change)
    outcome = "held" if held else "promoted"
    return ReleaseOutcome(
        version=version, workload=opts.workload, outcome=outcome, reasons=[str(flow_run.name)]
    )


@pytest.fixture
def weekly(prefect_api: None, flywheel_home: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The weekly flow with stand-in train and release, a minimum of 4 examples."""
    monkeypatch.setenv("FLYWHEEL_TRAIN__MIN_PAIRS", "4")
    monkeypatch.setenv("FLYWHEEL_WORKLOADS", '["support", "sql", "router", "boom"]')
    get_settings.cache_clear()
    monkeypatch.setattr(weekly_flow, "train", fake_train)
    monkeypatch.setattr(weekly_flow, "release", fake_release)
    return weekly_flow.weekly


def _plant(**workloads: int) -> None:
    rows = [r for w, n in workloads.items() for r in _rows(None if w == "none" else w, n)]
    append_rows(open_catalog(get_settings()), "training_examples", rows)


def test_one_workload_with_enough_data_is_released_by_name_the_other_skipped(weekly: Any) -> None:
    _plant(support=5, sql=2)
    out = weekly()["workloads"]
    assert out["support"].outcome == "promoted"
    assert out["support"].release.reasons == ["release-support-v7"]  # its run's name
    assert out["support"].train.train_run == "train-support"
    assert out["sql"].outcome == "skipped" and out["sql"].train is None
    assert out["sql"].message == "skipped: 2 examples < minimum 4"
    state = load_state(Runtime.from_env().store)
    assert state.release_of("support").stable == "v7" and state.stable == "v0"
    assert "sql" not in state.workloads


def test_a_held_workload_does_not_change_the_others_and_a_failure_stops_none(
    weekly: Any,
) -> None:
    _plant(support=4, router=6, boom=4)
    out = weekly()["workloads"]
    assert out["support"].outcome == "promoted" and out["router"].outcome == "held"
    assert out["router"].release.reasons == ["release-router-v6"]
    assert out["boom"].outcome == "failed" and "training crashed" in out["boom"].message
    state = load_state(Runtime.from_env().store)
    assert state.for_workload("support").stable == "v7"
    router = state.for_workload("router")
    assert router.stable == "v0" and router.phase == "held" and router.candidate == "v6"
    assert state.stable == "v0" and state.phase == "idle"


def test_without_workload_labels_the_shared_version_is_trained_and_released(
    weekly: Any,
) -> None:
    _plant(none=5)
    out = weekly()
    assert out["train"].workload is None and out["release"].workload is None
    assert load_state(Runtime.from_env().store).stable == "v6"  # len("shared")


def test_rows_of_a_workload_that_is_not_configured_train_the_shared_release(weekly: Any) -> None:
    """Rows curated under ``../x`` or ``gone`` (names FLYWHEEL_WORKLOADS does not list) are the
    shared release's: no train or release run, flow run name or release line is named after
    them."""
    _plant(support=4, none=1, **{"../x": 2, "gone": 2})
    out = weekly()["workloads"]
    assert sorted(out) == ["default", "support"]
    assert out["default"].examples == 5 and out["default"].outcome == "promoted"
    assert out["default"].train.train_run == "train-default"
    state = load_state(Runtime.from_env().store)
    assert sorted(state.workloads) == ["support"] and state.stable == "v7"  # len("default")
