"""The test-only crash points of :mod:`infra.faults`: a process is killed at exactly the
named write, and nothing happens without ``FLYWHEEL_TEST_KILL_AT``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
from infra.store import LocalStore
store = LocalStore(sys.argv[1])
for key in ["a/1", "b/1", "a/2", "a/3"]:
    store.put(key, b"x")
"""


def _run(root: Path, spec: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYWHEEL_")}
    env["PYTHONPATH"] = str(ROOT)
    if spec is not None:
        env["FLYWHEEL_TEST_KILL_AT"] = spec
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(root)], env=env, timeout=60)
    return done.returncode


def _keys(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_the_nth_write_under_a_prefix_is_killed_before_it_lands(tmp_path: Path) -> None:
    assert _run(tmp_path, "store.put:a/#2") == -9
    assert _keys(tmp_path) == ["a/1", "b/1"]


def test_without_the_variable_or_for_another_event_nothing_is_killed(tmp_path: Path) -> None:
    assert _run(tmp_path / "plain", None) == 0
    assert _run(tmp_path / "other", "catalog.commit") == 0
    assert _keys(tmp_path / "other") == ["a/1", "a/2", "a/3", "b/1"]
