"""The house rule on file size: no git-tracked Python file is over 400 lines, tests included
(a longer one is split by concept, as a reader looks for it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400


def tracked_python_files() -> list[Path]:
    """Every ``*.py`` file git tracks in the repository (untracked and ignored ones aside)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.py"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no tracked files to measure")
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_python_file_is_over_400_lines() -> None:
    files = tracked_python_files()
    assert files, "git lists no Python files"
    too_long = {
        str(path.relative_to(ROOT)): n
        for path in files
        if path.is_file()
        and (n := len(path.read_text(encoding="utf-8", errors="replace").splitlines())) > MAX_LINES
    }
    assert not too_long, "over 400 lines (split by concept): " + ", ".join(
        f"{name} ({n} lines)" for name, n in sorted(too_long.items())
    )
