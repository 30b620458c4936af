"""The drift scenario (``flywheel run --scenario drift``, tasks/demo/drift.py) on a fresh home:
coverage falls when users start asking powers and recovers after the refresh; the candidate
passes the gate on the old golden set, the canary catches it (twice in a row: the alert's
condition), and the gate on the refreshed set rejects it. About 20 s: scripted versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.catalog import open_catalog, scan
from infra.settings import get_settings

pytestmark = pytest.mark.integration


def test_drift_scenario_shows_the_miss_and_the_repair(flywheel_home: Path) -> None:
    from tasks.demo.drift import run_drift

    home = flywheel_home / "scenarios" / "drift"
    report = run_drift(home, requests=300)
    assert report.coverage_before == 1.0
    assert 0.3 < report.coverage_after_shift < 0.7 and report.coverage_after_refresh == 1.0
    assert report.uncovered_example is not None and "power" in report.uncovered_example
    assert [g.decision for g in report.old_gates] == ["PROCEED_TO_SHADOW"] * 2
    assert all(g.p_value < 0.05 and g.mean_diff > 0 for g in report.old_gates)
    assert all("rolled back" in c and "contradicts the gate" in c for c in report.canaries)
    assert report.contradictions_in_row == 2  # GoldenGateContradicted's condition
    assert report.proposed == report.accepted > 50 and not report.refused
    assert [g.decision for g in report.new_gates] == ["ROLLBACK"] * 2
    assert all(g.p_value < 0.05 and g.mean_diff < 0 for g in report.new_gates)
    assert report.new_golden_version != report.old_gates[0].golden_version
    assert {g.golden_version for g in report.new_gates} == {report.new_golden_version}
    text = report.text()
    assert "PROCEED_TO_SHADOW (paired t-test p=" in text and "ROLLBACK (paired t-test p=" in text
    assert "2 contradicted the gate (2 in a row at the end)" in text
    # the scenario's home only: the main home's catalog has no rows of it
    assert scan(open_catalog(get_settings()), "release_outcomes").num_rows == 0
    assert (home / "golden" / "calculator" / "HISTORY").is_file()
    assert report.plot == str(home / "agreement.png")
    assert (home / "agreement.png").read_bytes().startswith(b"\x89PNG")


def test_run_takes_the_scenario_and_refuses_an_unknown_one() -> None:
    from deployments import cli

    parser = cli.build_parser()
    assert parser.parse_args(["run", "--scenario", "drift"]).scenario == "drift"
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--scenario", "weather"])
