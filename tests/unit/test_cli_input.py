"""Bad input gets one line, not a traceback, and a non-zero exit, before any flow run starts:
run as an operator runs it (``python -m deployments.cli`` in a fresh FLYWHEEL_HOME)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def flywheel(
    *args: str, home: Path, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FLYWHEEL_", "PREFECT_"))}
    return subprocess.run(
        [sys.executable, "-m", "deployments.cli", *args],
        cwd=cwd or home,
        env={**clean, "PYTHONPATH": str(ROOT), "FLYWHEEL_HOME": str(home / "fw"), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error_line(done: subprocess.CompletedProcess[str], prefix: str) -> str:
    """The single stderr line of a refused command (and nothing on stdout)."""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(prefix), lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""
    return lines[0]


BAD_ARGUMENTS = [
    (["collect", "--window-start", "yesterday"], "'yesterday': not an ISO date-time"),
    (["collect", "--window-start", "2026-13-01T00:00:00Z"], "month must be in 1..12"),
    (["score", "--window-start", "2026-11-22T10:30:00Z"], "not on the hour"),
    (["curate", "--window-start", "2999-01-01T00:00:00Z"], "has not started yet"),
    (["collect", "--hours", "-2"], "--hours: expected a whole number from 1"),
    (["score", "--hours", "0"], "--hours: expected a whole number from 1"),
    (["simulate", "--requests", "-5"], "--requests: expected a whole number of at least 1"),
    (["run", "--requests", "0"], "--requests: expected a whole number of at least 10"),
    (["run", "--cycles", "21"], "--cycles: expected a whole number from 0 to 20"),
    (["train", "--max-steps", "-1"], "--max-steps: expected a whole number of at least 1"),
    (["retention", "--days", "-2"], "--days: expected a whole number of at least 1"),
    (["forget-user", " "], "user_id: must not be empty"),
]


@pytest.mark.parametrize(("args", "says"), BAD_ARGUMENTS)
def test_a_bad_argument_is_refused_in_one_line_before_the_command_runs(
    args: list[str],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    from deployments import cli

    monkeypatch.setenv("FLYWHEEL_HOME", str(tmp_path))
    started: list[str] = []
    table = tuple(c._replace(handler=lambda ns: started.append(ns) or 0) for c in cli.COMMANDS)
    monkeypatch.setattr(cli, "COMMANDS", table)

    with pytest.raises(SystemExit) as exit_:
        cli.main(args)

    assert exit_.value.code == 2 and started == []
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"flywheel {args[0]}: error: argument ")
    assert says in err[0]


@pytest.mark.parametrize("index", [0, 1, 4])
def test_a_bad_argument_from_the_shell_is_one_line_exit_2_and_no_flow_run(
    tmp_path: Path, index: int
) -> None:
    args, says = BAD_ARGUMENTS[index]
    done = flywheel(*args, home=tmp_path)

    assert done.returncode == 2
    assert says in one_error_line(done, f"flywheel {args[0]}: error: argument ")
    assert not (tmp_path / "fw" / "prefect").exists()  # no Prefect API started, no run


def test_zero_cycles_without_distil_is_refused_before_anything_starts(tmp_path: Path) -> None:
    done = flywheel("run", "--cycles", "0", home=tmp_path)

    assert done.returncode == 2
    assert "add --distil" in one_error_line(done, "flywheel run: error: --cycles 0 runs nothing")
    assert not (tmp_path / "fw" / "prefect").exists()  # no Prefect API started, no run


def test_a_malformed_setting_is_named_even_for_help(tmp_path: Path) -> None:
    done = flywheel("--help", home=tmp_path, FLYWHEEL_GATEWAY__PORT="abc")

    assert done.returncode == 2
    line = one_error_line(done, "flywheel: error: FLYWHEEL_GATEWAY__PORT: ")
    assert "valid integer" in line and "'abc'" in line


def test_a_bad_list_in_dotenv_names_the_variable(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FLYWHEEL_CURATE__LANGUAGES=en,de\n")

    done = flywheel("status", home=tmp_path)

    assert done.returncode == 2
    line = one_error_line(done, "flywheel: error: FLYWHEEL_CURATE__LANGUAGES: ")
    assert "JSON" in line and '["a", "b"]' in line


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {"FLYWHEEL_WORKLOADS": '["support", "../x"]'},
            "FLYWHEEL_WORKLOADS: '../x' is not a workload name (lower-case letters",
        ),
        (
            {"FLYWHEEL_WORKLOADS": '["support"]', "FLYWHEEL_REWARD__VERIFIERS": '{"sql": "m:f"}'},
            "FLYWHEEL_REWARD__VERIFIERS names workload 'sql', which FLYWHEEL_WORKLOADS does not "
            "list (support)",
        ),
        ({"FLYWHEEL_DEMO_WORKLOADS": '["calculator"]'}, "FLYWHEEL_DEMO_WORKLOADS is now"),
    ],
)
def test_a_workloads_setting_that_does_not_hold_is_one_line(
    tmp_path: Path, env: dict[str, str], says: str
) -> None:
    done = flywheel("status", home=tmp_path, **env)

    assert done.returncode == 2
    assert says in one_error_line(done, "flywheel: error: ")


def test_a_store_url_that_is_no_path_or_url_is_refused_not_created(tmp_path: Path) -> None:
    done = flywheel("status", home=tmp_path, FLYWHEEL_STORE_URL="::bad::")

    assert done.returncode == 2
    line = one_error_line(done, "flywheel: error: FLYWHEEL_STORE_URL: ")
    assert "s3://bucket/prefix" in line
    assert not (tmp_path / "::bad::").exists()


def test_status_is_aligned_text_by_default_and_json_with_the_flag(tmp_path: Path) -> None:
    text = flywheel("status", home=tmp_path)
    as_json = flywheel("status", "--json", home=tmp_path)
    global_flag = flywheel("--json", "status", home=tmp_path)

    assert text.returncode == as_json.returncode == global_flag.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "status"
    assert "  stable           v0" in lines and "  candidate        -" in lines
    values_start = {line.index(line.split()[-1]) for line in lines[1:] if line.split()[-1] == "-"}
    assert len(values_start) == 1  # one column of values
    state = json.loads(as_json.stdout)
    assert state["command"] == "status" and state["stable"] == "v0"
    assert state["candidate"] is None and json.loads(global_flag.stdout) == state
