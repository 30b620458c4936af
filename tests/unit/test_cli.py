"""The ``flywheel`` command: one plain table of commands (deployments/cli.py) over handlers
(deployments/*commands.py), the same parser whether started as ``flywheel`` or
``python -m deployments.cli``, one clear line for a known error, and the ``flywheel run``
summary (flows/loop.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deployments import (
    cli,
    commands,
    governance_commands,
    keys_commands,
    pii_eval_command,
    release_commands,
)
from infra.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
HANDLER_MODULES = {
    m.__name__
    for m in (commands, governance_commands, release_commands, pii_eval_command, keys_commands)
}
DESIGN_COMMANDS = set(
    [
        "run",
        "bootstrap",
        "gateway",
        "simulate",
        "collect",
        "score",
        "curate",
        "train",
        "release",
        "status",
        "promote",
        "pause",
        "resume",
        "abort",
        "rollback",
        "forget-user",
        "retention",
        "lineage",
        "erasure-status",
        "pii-eval",
        "distil",
        "keys",
    ]
) | {
    "review",
    "prove",
    "consent",
    "erasure-resolve",
    "report",
    "golden",
}  # not in DESIGN.md's list yet


def test_every_command_of_the_design_is_in_the_table_once() -> None:
    names = [c.name for c in cli.COMMANDS]
    assert len(names) == len(set(names))
    assert set(names) == DESIGN_COMMANDS
    for cmd in cli.COMMANDS:
        assert cmd.handler.__module__ in HANDLER_MODULES, cmd.name
        assert cmd.help and not cmd.help.endswith(".")


def test_arguments_parse_as_documented() -> None:
    parser = cli.build_parser()
    ns = parser.parse_args(["collect", "--window-start", "2026-11-22T10:00:00Z", "--hours", "3"])
    assert (ns.command, ns.window_start, ns.hours) == ("collect", "2026-11-22T10:00:00Z", 3)
    ns = parser.parse_args(["release", "v3", "--force"])
    assert (ns.version, ns.force, ns.skip_shadow) == ("v3", True, False)
    ns = parser.parse_args(["abort"])
    assert (ns.reason, ns.actor) == ("manual", "cli")
    ns = parser.parse_args(["train", "--method", "grpo"])
    assert (ns.method, ns.max_steps) == ("grpo", None)
    with pytest.raises(SystemExit):
        parser.parse_args(["lineage"])  # --user is required


def test_python_dash_m_lists_every_command(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deployments.cli", "--help"],
        cwd=ROOT,
        env={**os.environ, "FLYWHEEL_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for name in DESIGN_COMMANDS:
        assert f"    {name} " in done.stdout, name
    assert "candidate to 0 %, never" in done.stdout


def test_a_known_error_is_one_line_and_exit_code_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("FLYWHEEL_HOME", str(tmp_path))

    def fails(ns: argparse.Namespace) -> int:
        raise ConfigError("FLYWHEEL_STORE_URL is not a URL")

    table = tuple(c._replace(handler=fails) if c.name == "status" else c for c in cli.COMMANDS)
    monkeypatch.setattr(cli, "COMMANDS", table)
    assert cli.main(["status"]) == 2
    err = capsys.readouterr().err
    assert err == "flywheel status: error: FLYWHEEL_STORE_URL is not a URL\n"


def test_the_run_summary() -> None:
    from tasks.demo.loop_summary import CycleSummary, LoopSummary, loop_report

    cycle = CycleSummary(
        cycle=1,
        baseline="v0",
        traces=512,
        quarantined=3,
        pii_entities=40,
        examples=480,
        pairs=120,
        train_status="trained",
        candidate="v1",
        baseline_accuracy=0.5,
        candidate_accuracy=0.625,
        baseline_reward=0.41,
        candidate_reward=0.52,
        p_value=0.0012,
        decision="PROCEED_TO_SHADOW",
        outcome="promoted",
    )
    summary = LoopSummary(
        base_version="v0", base_accuracy=0.5, bootstrap_cached=True, cycles=[cycle], wall_s=301
    )
    assert loop_report(summary).splitlines() == [
        "flywheel run: 1 cycle(s) in 301 s; base model v0 (cached, golden accuracy 50.0%)",
        "cycle 1 (baseline v0):",
        "  traces collected      512 (3 quarantined)",
        "  PII entities removed  40; training examples 480",
        "  preference pairs      120  [trained]",
        "  golden accuracy       v0 50.0% -> v1 62.5%",
        "  golden reward         0.410 -> 0.520, paired t-test p = 0.0012 (PROCEED_TO_SHADOW)",
        "  release               promoted",
    ]
    skipped = CycleSummary(cycle=2, baseline="v1", train_status="too few pairs", reasons=["x"])
    lines = loop_report(
        LoopSummary(
            base_version="v0",
            base_accuracy=0.5,
            bootstrap_cached=False,
            cycles=[skipped],
            wall_s=1,
        )
    ).splitlines()
    assert "bootstrapped" in lines[0]
    assert lines[-1] == "  release               not released (x)"
    assert not any("golden" in line for line in lines[1:])


def _table_with(monkeypatch: pytest.MonkeyPatch, name: str, handler: object) -> None:
    table = tuple(c._replace(handler=handler) if c.name == name else c for c in cli.COMMANDS)
    monkeypatch.setattr(cli, "COMMANDS", table)


def test_a_failed_run_is_one_line_exit_1_and_the_traceback_only_with_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("FLYWHEEL_HOME", str(tmp_path))

    def fails(ns: argparse.Namespace) -> int:
        raise RuntimeError("the judge endpoint\nwent away")

    _table_with(monkeypatch, "status", fails)

    assert cli.main(["status"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("flywheel status: error: RuntimeError: the judge endpoint went away")
    assert "--debug" in err

    assert cli.main(["status", "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.splitlines()[-1].startswith("flywheel status: error:")


def test_run_exits_non_zero_with_the_reason_when_the_candidate_is_not_promoted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import flows.loop
    from deployments import progress
    from tasks.demo.loop_summary import CycleSummary, LoopSummary

    monkeypatch.setenv("FLYWHEEL_HOME", str(tmp_path))
    monkeypatch.setattr(progress, "ensure_prefect_api", lambda command: None)
    monkeypatch.setattr(progress, "quiet_prefect_console", lambda: None)
    outcome = {"value": "rolled_back"}

    def fake_loop(opts: object) -> LoopSummary:
        cycle = CycleSummary(cycle=1, baseline="v0", candidate="v1", outcome=outcome["value"])
        cycle.reasons = ["canary error ratio 3.1 > 1.5"] if outcome["value"] != "promoted" else []
        return LoopSummary(
            base_version="v0", base_accuracy=0.5, bootstrap_cached=True, cycles=[cycle], wall_s=9
        )

    monkeypatch.setattr(flows.loop, "run_loop", fake_loop)

    assert cli.main(["run"]) == 1
    out, err = capsys.readouterr()
    assert "release               rolled_back" in out
    assert err.splitlines()[-1] == (
        "flywheel run: error: cycle 1: candidate v1 was not promoted: rolled_back "
        "(canary error ratio 3.1 > 1.5)"
    )

    outcome["value"] = "promoted"
    assert cli.main(["run", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    summary = json.loads(out)
    assert summary["command"] == "run" and summary["cycles"][0]["outcome"] == "promoted"


def test_not_promoted_names_the_first_cycle_that_did_not_improve() -> None:
    from tasks.demo.loop_summary import CycleSummary, LoopSummary, not_promoted

    def loop(*cycles: CycleSummary) -> LoopSummary:
        return LoopSummary(
            base_version="v0",
            base_accuracy=0.5,
            bootstrap_cached=True,
            cycles=list(cycles),
            wall_s=1,
        )

    good = CycleSummary(cycle=1, baseline="v0", candidate="v1", outcome="promoted")
    skipped = CycleSummary(cycle=2, baseline="v1", train_status="skipped: 12 pairs < minimum 50")
    assert not_promoted(loop(good)) is None
    assert not_promoted(loop(good, skipped)) == (
        "cycle 2: no candidate to release (skipped: 12 pairs < minimum 50)"
    )
    plateau = CycleSummary(
        cycle=2, baseline="v1", candidate="v2", outcome="held", reasons=["not better"]
    )
    assert not_promoted(loop(good, plateau)) is None  # the plateau the report shows
    held = CycleSummary(cycle=1, baseline="v0", candidate="v1", outcome="held", reasons=["p=0.4"])
    assert not_promoted(loop(held, good)) == "cycle 1: candidate v1 was not promoted: held (p=0.4)"
