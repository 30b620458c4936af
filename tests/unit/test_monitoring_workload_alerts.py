"""The release alerts per workload, under ``promtool test rules`` with the real rule file: each
workload's candidate is compared with that workload's own stable traffic, and an alert carries
the workload it is about (so the gateway rolls back that workload alone), never another."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.unit.test_monitoring_alerts import (
    ERR,
    FB,
    LAT,
    REQ,
    ROLLBACK,
    check_alert,
    series,
    with_voices,
)
from tests.unit.test_monitoring_config import RULES, rules, run, tool


def requests(model: str, route: str, workload: str, per_min: float, errors: float = 0):
    out = [series(REQ, f"0+{per_min}x60", model=model, route=route, workload=workload)]
    if errors:
        out.append(series(ERR, f"0+{errors}x60", model=model, route=route, workload=workload))
    return with_voices(out)


def slow(model: str, route: str, workload: str, per_min: int, upto: float):
    """A histogram where each request takes at most ``upto`` seconds, and its request count."""
    return [
        series(
            LAT,
            f"0+{per_min if float(le) >= upto else 0}x60",
            model=model,
            route=route,
            workload=workload,
            le=le,
        )
        for le in ("0.005", "0.05", "0.1", "1", "2.5", "+Inf")
    ] + requests(model, route, workload, per_min)


def thumbs(model: str, workload: str, up: int, down: int):
    return with_voices(
        [
            series(FB, f"0+{up}x90", model=model, value="1", workload=workload),
            series(FB, f"0+{down}x90", model=model, value="-1", workload=workload),
        ]
    )


def both_on(stable_a: float = 0, stable_b: float = 0):
    """v1 stable for workloads A and B (``stable_*``: its errors per minute in each)."""
    return requests("v1", "stable", "A", 100, stable_a) + requests(
        "v1", "stable", "B", 100, stable_b
    )


def fired(model: str, workload: str) -> list[dict[str, str]]:
    return [{"model": model, "workload": workload, **ROLLBACK}]


CASES = {
    "A's canary fails, B's is healthy: A alone": (
        both_on() + requests("v2", "canary", "A", 20, 4) + requests("v3", "canary", "B", 20, 0),
        "CandidateModelRegression",
        "10m",
        fired("v2", "A"),
    ),
    "A's candidate as bad as A's stable, where B's stable has no errors": (
        # 6 % against A's own 5 %: 1.2x; against B's or both stables' ratio it would fire
        both_on(stable_a=5) + requests("v2", "canary", "A", 50, 3),
        "CandidateModelRegression",
        "10m",
        [],
    ),
    "one candidate in two workloads, failing in A only": (
        both_on() + requests("v2", "canary", "A", 20, 4) + requests("v2", "canary", "B", 20, 0),
        "CandidateModelRegression",
        "10m",
        fired("v2", "A"),
    ),
    "A's canary at 100 %, B's stable healthy: the floor, not B's traffic": (
        requests("v1", "stable", "B", 100) + requests("v2", "canary", "A", 100, 5),
        "CandidateModelRegression",
        "10m",
        fired("v2", "A"),
    ),
    "A's canary slow, B's as fast as its stable": (
        slow("v1", "stable", "A", 200, 0.05)
        + slow("v1", "stable", "B", 200, 0.05)
        + slow("v2", "canary", "A", 150, 2.5)
        + slow("v3", "canary", "B", 150, 0.05),
        "CandidateLatencyRegression",
        "15m",
        fired("v2", "A"),
    ),
    "A's slow stable is A's baseline, not B's fast one": (
        slow("v1", "stable", "A", 200, 2.5)
        + slow("v1", "stable", "B", 200, 0.05)
        + slow("v2", "canary", "A", 150, 2.5),
        "CandidateLatencyRegression",
        "15m",
        [],
    ),
    "A's users dislike its candidate, B's like theirs": (
        both_on()
        + requests("v2", "canary", "A", 20)
        + requests("v3", "canary", "B", 20)
        + thumbs("v1", "A", 19, 1)
        + thumbs("v1", "B", 19, 1)
        + thumbs("v2", "A", 1, 1)
        + thumbs("v3", "B", 19, 1),
        "CandidateNegativeFeedback",
        "50m",
        fired("v2", "A"),
    ),
    "A's stable already disliked: A's bar, not B's": (
        # A: 70 % down on stable, its candidate 80 % (under halfway to 100 %, 85 %); B's
        # stable is liked, and against B's share the candidate would fire
        both_on()
        + requests("v2", "canary", "A", 20)
        + thumbs("v1", "A", 3, 7)
        + thumbs("v1", "B", 19, 1)
        + thumbs("v2", "A", 2, 8),
        "CandidateNegativeFeedback",
        "50m",
        [],
    ),
    "A's candidate nearly all thumbs-down against a disliked stable": (
        both_on()
        + requests("v2", "canary", "A", 20)
        + thumbs("v1", "A", 3, 7)
        + thumbs("v1", "B", 19, 1)
        + thumbs("v2", "A", 0, 10),
        "CandidateNegativeFeedback",
        "50m",
        fired("v2", "A"),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_workload_alert_behaviour(case: str, tmp_path: Path) -> None:
    check_alert(CASES[case], tmp_path)


def test_the_summary_names_the_workload(tmp_path: Path) -> None:
    rule = next(r for r in rules() if r["alert"] == "CandidateModelRegression")
    summary = (
        "Candidate v2 (workload A): 20% of its users met an error, over 1.5x the stable "
        "version's share"
    )
    test = {
        "rule_files": [str(RULES)],
        "tests": [
            {
                "interval": "1m",
                "input_series": both_on() + requests("v2", "canary", "A", 20, 4),
                "alert_rule_test": [
                    {
                        "eval_time": "10m",
                        "alertname": "CandidateModelRegression",
                        "exp_alerts": [
                            {
                                "exp_labels": fired("v2", "A")[0],
                                "exp_annotations": {**rule["annotations"], "summary": summary},
                            }
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(test))
    out = run(tool("promtool"), "test", "rules", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
