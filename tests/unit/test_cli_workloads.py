"""``flywheel status`` and the release controls per workload, run as an operator runs them
(``python -m deployments.cli`` in a fresh FLYWHEEL_HOME whose store holds a routing state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from infra.routing import RoutingState, WorkloadRelease, load_state, save_state
from infra.store import LocalStore

ROOT = Path(__file__).resolve().parents[2]


def flywheel(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FLYWHEEL_", "PREFECT_"))}
    return subprocess.run(
        [sys.executable, "-m", "deployments.cli", *args],
        cwd=home,
        env={**clean, "PYTHONPATH": str(ROOT), "FLYWHEEL_HOME": str(home / "fw")},
        capture_output=True,
        text=True,
        timeout=120,
    )


def store_of(home: Path) -> LocalStore:
    return LocalStore(home / "fw" / "store")


def two_workloads() -> RoutingState:
    return RoutingState(
        stable="v0",
        candidate="v1",
        phase="canary",
        weight=10,
        workloads={
            "sql": WorkloadRelease(stable="sql-0", candidate="sql-1", phase="shadow"),
            "chat": WorkloadRelease(phase="rolled_back", rejected=["chat-1"]),
        },
    )


def test_status_shows_a_line_per_workload_the_shared_one_first(tmp_path: Path) -> None:
    save_state(store_of(tmp_path), two_workloads())

    text = flywheel("status", home=tmp_path)
    as_json = flywheel("status", "--json", home=tmp_path)

    assert text.returncode == as_json.returncode == 0, text.stderr + as_json.stderr
    lines = text.stdout.splitlines()
    start = lines.index("workloads")
    assert [line.split()[0] for line in lines[start + 1 :]] == ["(shared)", "chat", "sql"]
    assert lines[start + 1].endswith("stable v0, candidate v1, phase canary, weight 10%")
    assert lines[start + 2].endswith("stable v0, candidate -, phase rolled_back, weight 0%")
    assert lines[start + 3].endswith("stable sql-0, candidate sql-1, phase shadow, weight 0%")
    rows = json.loads(as_json.stdout)["workloads"]
    assert [(r["workload"], r["stable"], r["candidate"], r["phase"]) for r in rows] == [
        (None, "v0", "v1", "canary"),
        ("chat", "v0", None, "rolled_back"),
        ("sql", "sql-0", "sql-1", "shadow"),
    ]


def test_status_without_workloads_prints_no_workload_lines(tmp_path: Path) -> None:
    done = flywheel("status", home=tmp_path)
    assert done.returncode == 0 and "workloads" not in done.stdout
    rows = json.loads(flywheel("status", "--json", home=tmp_path).stdout)["workloads"]
    assert rows == [
        {
            "workload": None,
            "stable": "v0",
            "candidate": None,
            "phase": "idle",
            "weight": 0.0,
            "release_id": None,
        }
    ]
    assert load_state(store_of(tmp_path)).workloads == {}


def test_a_workload_that_is_not_configured_is_refused_in_one_line(tmp_path: Path) -> None:
    """``sql`` has a line in the routing state, but FLYWHEEL_WORKLOADS (the demo's two by
    default) does not list it: refused before anything runs, as ``../x`` is."""
    save_state(store_of(tmp_path), two_workloads())
    before = load_state(store_of(tmp_path))
    for args in (("train", "--workload", "../x"), ("release", "v1", "--workload", "sql")):
        done = flywheel(*args, home=tmp_path)
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout
        assert f"workload {args[-1]!r} is not configured" in done.stderr
        assert "FLYWHEEL_WORKLOADS lists: calculator, clock" in done.stderr
    assert load_state(store_of(tmp_path)) == before
    assert not (tmp_path / "fw" / "store" / "models").exists()
