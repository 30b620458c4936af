"""Offline-online agreement per release (tasks/release/gate/agreement.py): the ``release_outcomes``
row built from a gate report and the canary steps' evidence, its table, ``flywheel report
agreement`` and the alert when the canary contradicts the gate twice in a row."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.release.gate.agreement import (
    Release,
    in_a_row,
    outcome_row,
    read_outcomes,
    write_outcome,
)
from tasks.release.gate.agreement_online import CanaryWatch, live_verifier
from tasks.release.gate.agreement_report import agreement
from tests.unit.test_monitoring_alerts import check_alert, series

T0 = datetime(2026, 11, 30, 10, 5, tzinfo=UTC)


def gate(diff: float, p: float, *, acc: tuple[float, float] = (0.6, 0.7)) -> dict[str, Any]:
    """A gate report as report.json holds it (the fields the row reads)."""
    return {
        "decision": "PROCEED_TO_SHADOW" if p < 0.05 and diff > 0 else "MANUAL_REVIEW",
        "baseline": "v1",
        "golden_version": "g0123456789ab",
        "test": {
            "n": 300,
            "mean_diff": diff,
            "ci_low": diff - 0.02,
            "ci_high": diff + 0.02,
            "p_value": p,
        },
        "checks": [
            {
                "name": "golden_verifier",
                "extra": {
                    "verified_accuracy_baseline": acc[0],
                    "verified_accuracy_candidate": acc[1],
                    "items": 300,
                    "won": 45,
                    "lost": 15,
                },
            }
        ],
    }


def step(cand_votes: dict[str, float], stable_votes: dict[str, float], errors: float = 0) -> dict:
    """One canary step's evidence: both versions' stats over the same interval."""
    return {
        "candidate": {"requests": 200.0, "errors": errors, "feedback": cand_votes},
        "stable": {"requests": 600.0, "errors": 3.0, "feedback": stable_votes},
    }


def row(diff: float, p: float, steps: list[dict], **kw: Any) -> dict[str, Any]:
    release = Release(
        release_id=kw.pop("release_id", "r1"),
        workload=kw.pop("workload", "calculator"),
        version=kw.pop("version", "v2"),
        baseline="v1",
        outcome=kw.pop("outcome", "promoted"),
    )
    canary = CanaryWatch(
        windows=steps,
        start=T0,
        end=T0 + timedelta(minutes=6),
        verifier=kw.pop("verifier", None),
    )
    return outcome_row(
        release,
        gate=gate(diff, p),
        canary=canary,
        alpha=0.05,
        created_at=kw.pop("created_at", T0 + timedelta(minutes=7)),
    )


def test_a_gain_users_confirm_agrees_with_the_gate() -> None:
    r = row(
        0.05,
        0.001,
        [step({"1": 80, "-1": 20}, {"1": 200, "-1": 100}), step({"1": 40}, {"1": 90, "0": 10})],
    )
    assert r["offline_gain"] and not r["online_worse"] and not r["contradicts"]
    assert r["voters_candidate"] == 140 and r["voters_stable"] == 400  # summed over both steps
    assert r["feedback_candidate"] == pytest.approx(120 / 140)
    assert r["feedback_stable"] == pytest.approx(295 / 400)
    assert r["online_feedback_low"] > 0  # users liked the candidate: significantly
    assert r["golden_accuracy_diff"] == pytest.approx(0.1)
    assert r["golden_accuracy_low"] < 0.1 < r["golden_accuracy_high"]
    assert r["golden_version"] == "g0123456789ab" and r["golden_items"] == 300
    assert r["error_share_stable"] == pytest.approx(6 / 1200)


def test_users_who_dislike_the_candidate_the_gate_passed_contradict_it() -> None:
    r = row(0.05, 0.001, [step({"1": 30, "-1": 70}, {"1": 240, "-1": 60})] * 2)
    assert r["online_feedback_high"] < 0
    assert r["offline_gain"] and r["online_worse"] and r["contradicts"]


def test_a_worse_canary_after_an_insignificant_gate_is_no_contradiction() -> None:
    r = row(0.01, 0.4, [step({"1": 30, "-1": 70}, {"1": 240, "-1": 60})])
    assert r["online_worse"] and not r["offline_gain"] and not r["contradicts"]


def test_a_few_votes_either_way_prove_nothing() -> None:
    r = row(0.05, 0.001, [step({"1": 1, "-1": 2}, {"1": 3})])
    assert r["online_feedback_low"] < 0 < r["online_feedback_high"]
    assert not r["contradicts"]


def test_more_errors_online_contradict_the_gate() -> None:
    r = row(0.05, 0.001, [step({}, {}, errors=30.0)])
    assert r["online_error_low"] > 0 and r["contradicts"]
    assert r["online_feedback_diff"] is None  # nobody voted: no feedback difference


def test_the_verifier_pass_rate_of_live_answers_is_per_version() -> None:
    r = row(0.05, 0.001, [step({}, {})], verifier={"v2": (100, 52), "v1": (300, 243)})
    assert (r["verifier_pass_candidate"], r["verifier_pass_stable"]) == (0.52, 0.81)
    assert r["online_verifier_high"] < 0 and r["contradicts"]


def scored_window(
    tmp_path: Path, window: str, traces: list[tuple[str, str, datetime, float | None]]
):
    """A collected and scored hour in a local store: (trace id, version, created at, verdict)."""
    from infra.keys import rollouts_key, scores_key
    from infra.store import LocalStore

    store = LocalStore(tmp_path / "store")
    rollouts = pa.table(
        {
            "trace_id": [t[0] for t in traces],
            "model_version": [t[1] for t in traces],
            "created_at": pa.array([t[2] for t in traces], pa.timestamp("us", tz="UTC")),
            "workload": ["calculator"] * len(traces),
            "question": ["What is 3^4?"] * len(traces),  # personal data stays unread
        }
    )
    scores = pa.table(
        {
            "trace_id": [t[0] for t in traces],
            "reward_judge": pa.array([t[3] for t in traces], pa.float64()),
        }
    )
    for key, table in ((rollouts_key(window), rollouts), (scores_key(window), scores)):
        buf = io.BytesIO()
        pq.write_table(table, buf)
        store.put(key, buf.getvalue())
    return store


def test_live_verifier_counts_only_the_canary_interval(tmp_path: Path) -> None:
    inside, before = T0 + timedelta(minutes=2), T0 - timedelta(minutes=3)
    store = scored_window(
        tmp_path,
        "2026-11-30T10:00:00Z",
        [
            ("a", "v2", inside, 1.0),
            ("b", "v2", inside, 0.0),
            ("c", "v1", inside, 1.0),
            ("d", "v1", before, 0.0),  # before the canary began
            ("e", "v1", inside, None),  # the verifier could not tell
            ("f", "v0", inside, 1.0),  # another version
        ],
    )
    counts = live_verifier(store, since=T0, until=T0 + timedelta(minutes=6), versions=["v2", "v1"])
    assert counts == {"v2": (2, 1), "v1": (1, 1)}
    later = live_verifier(store, since=T0, until=T0 + timedelta(hours=1), versions=["v2"])
    assert later is None  # 11:00 is not scored yet: no pass rate from half the canary


def test_the_table_keeps_one_row_per_release_and_counts_contradictions_in_a_row(settings) -> None:
    from infra.catalog import open_catalog

    catalog = open_catalog(settings)
    bad = [step({"1": 30, "-1": 70}, {"1": 240, "-1": 60})]
    good = [step({"1": 90, "-1": 10}, {"1": 200, "-1": 100})]
    at = [T0 + timedelta(hours=h) for h in range(4)]
    write_outcome(catalog, row(0.05, 0.001, good, release_id="r1", version="v2", created_at=at[0]))
    write_outcome(catalog, row(0.05, 0.001, bad, release_id="r2", version="v3", created_at=at[1]))
    rows = write_outcome(
        catalog, row(0.04, 0.002, bad, release_id="r3", version="v4", created_at=at[2])
    )
    again = write_outcome(
        catalog, row(0.04, 0.002, bad, release_id="r3", version="v4", created_at=at[2])
    )
    assert [r["version"] for r in again] == ["v2", "v3", "v4"]  # a rerun replaced its row
    assert in_a_row(rows) == 2
    write_outcome(
        catalog, row(0.05, 0.001, bad, workload="clock", release_id="r9", created_at=at[3])
    )
    assert [r["release_id"] for r in read_outcomes(catalog, "calculator")] == ["r1", "r2", "r3"]
    summary = agreement(read_outcomes(catalog, "calculator"))
    assert summary["compared"] == 3 and summary["sign_agreement"] == pytest.approx(1 / 3)
    assert summary["spearman"] is not None and summary["contradictions_in_row"] == 2


def test_report_agreement_prints_the_releases_and_writes_the_plot(settings, tmp_path: Path) -> None:
    from deployments.cli import main
    from infra.catalog import open_catalog

    catalog = open_catalog(settings)
    write_outcome(
        catalog,
        row(0.05, 0.001, [step({"1": 90, "-1": 10}, {"1": 200, "-1": 100})], release_id="r1"),
    )
    write_outcome(
        catalog,
        row(
            0.06,
            0.001,
            [step({"1": 30, "-1": 70}, {"1": 240, "-1": 60})],
            release_id="r2",
            version="v3",
            created_at=T0 + timedelta(hours=1),
        ),
    )
    plot = tmp_path / "agreement.png"
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["report", "agreement", "--workload", "calculator", "--plot", str(plot)]) == 0
    text = out.getvalue()
    assert "v2  v1  PROCEED_TO_SHADOW  promoted  g0123456789ab" in text
    assert "sign agreement 50%" in text and "1 contradicted the gate" in text
    assert plot.read_bytes().startswith(b"\x89PNG")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--json", "report", "agreement", "--plot", str(plot)]) == 0
    data = json.loads(out.getvalue())
    assert [r["contradicts"] for r in data["rows"]] == [False, True]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ("2x40", [{"workload": "calculator", "severity": "warning"}]),
        ("1x40", []),  # one contradiction can be chance
        ("2x5 0x35", []),  # the next release agreed again
    ],
)
def test_two_contradictions_in_a_row_fire_the_alert(values: str, expected, tmp_path: Path) -> None:
    planted = series(
        "flywheel_release_contradictions_in_row",
        values,
        job="flywheel",
        stage="release",
        workload="calculator",
    )
    check_alert(([planted], "GoldenGateContradicted", "30m", expected), tmp_path)


def test_report_fills_in_the_verifier_once_the_canary_is_scored(settings, tmp_path: Path) -> None:
    from infra.catalog import open_catalog
    from tasks.release.gate.agreement import refresh_verifier

    catalog = open_catalog(settings)
    write_outcome(catalog, row(0.05, 0.001, [step({}, {})], release_id="r1"))
    rows = read_outcomes(catalog)
    assert rows[0]["verifier_scored_candidate"] is None  # the canary was not scored yet
    empty = scored_window(tmp_path / "none", "2026-11-30T09:00:00Z", [])
    assert refresh_verifier(catalog, empty, rows) == 0  # its hour is still not scored
    inside = T0 + timedelta(minutes=1)
    traces = [(f"c{i}", "v2", inside, 1.0 if i < 10 else 0.0) for i in range(40)]
    traces += [(f"s{i}", "v1", inside, 1.0 if i < 100 else 0.0) for i in range(120)]
    store = scored_window(tmp_path, "2026-11-30T10:00:00Z", traces)
    assert refresh_verifier(catalog, store, rows) == 1
    (again,) = read_outcomes(catalog)
    assert (again["verifier_scored_candidate"], again["verifier_pass_candidate"]) == (40, 0.25)
    assert again["verifier_pass_stable"] == pytest.approx(100 / 120)
    assert again["online_verifier_high"] < 0 and again["contradicts"]  # judged again
    assert refresh_verifier(catalog, store, read_outcomes(catalog)) == 0  # done once
