"""What the release and stage alerts fire on: series planted under ``promtool test rules``
with the real rule file (annotations aside), and the rollback alert's summary. ``series`` and
``check_alert`` serve the other alert tests too."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.unit.test_monitoring_config import RULES, rules, run, tool

REQ, ERR, LAT = "agent_requests_total", "agent_errors_total", "agent_latency_seconds_bucket"
FB, LAST = "user_feedback_total", "flywheel_stage_last_success_timestamp_seconds"
# the voice series (infra/gateway/voices.py) the release rules count: each planted request
# here comes from a user of its own, so the users count what the events count
VOICES = {
    REQ: "agent_voices_total",
    ERR: "agent_error_voices_total",
    FB: "user_feedback_voices_total",
}
RECORDS = "flywheel_stage_records_total"
ROLLBACK = {"severity": "critical", "action": "rollback"}
SUMMARY = "Candidate v1: 20% of its users met an error, over 1.5x the stable version's share"


GATEWAY_SERIES = ("agent_", "user_feedback_", "flywheel_route_", "flywheel_trace_sink_")


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    """One input series; the gateway's carry its scrape's ``job="gateway"`` unless ``job`` is
    given (the rules read that job's series alone)."""
    if name.startswith(GATEWAY_SERIES):
        labels = {"job": "gateway", **labels}
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def with_voices(planted: list[dict[str, str]]) -> list[dict[str, str]]:
    """``planted`` and, for each request, error and feedback series, its voice series with the
    same values (one user per event)."""
    voices = []
    for s in planted:
        name, _, rest = s["series"].partition("{")
        if name in VOICES:
            voices.append({"series": f"{VOICES[name]}{{{rest}", "values": s["values"]})
    return planted + voices


def latency(model: str, route: str, per_min: int, upto: float) -> list[dict[str, str]]:
    """Cumulative buckets of a histogram where every request takes at most ``upto`` seconds."""
    return [
        series(LAT, f"0+{per_min if float(le) >= upto else 0}x60", model=model, route=route, le=le)
        for le in ("0.005", "0.05", "0.1", "1", "2.5", "+Inf")
    ] + with_voices([series(REQ, f"0+{per_min}x60", model=model, route=route)])


def stable(per_min: int = 100, errors: float = 0) -> list[dict[str, str]]:
    out = [series(REQ, f"0+{per_min}x60", model="v0", route="stable")]
    out += [series(ERR, f"0+{errors}x60", model="v0", route="stable")] if errors else []
    return with_voices(out)


def candidate(route: str, per_min: float, errors: float) -> list[dict[str, str]]:
    return with_voices(
        [
            series(REQ, f"0+{per_min}x60", model="v1", route=route),
            series(ERR, f"0+{errors}x60", model="v1", route=route),
        ]
    )


def feedback(model: str, up: int, down: int) -> list[dict[str, str]]:
    return with_voices(
        [
            series(FB, f"0+{up}x90", model=model, value="1"),
            series(FB, f"0+{down}x90", model=model, value="-1"),
        ]
    )


CASES: dict[str, tuple[list[dict[str, str]], str, str, list[dict[str, str]]]] = {
    # name: (input series, alert, eval time, expected alerts' labels)
    "errors on a candidate, none on stable": (
        stable() + candidate("canary", 20, 4),
        "CandidateModelRegression",
        "10m",
        [{"model": "v1", **ROLLBACK}],
    ),
    "candidate 1.6x stable over many users": (
        # 6.4 % of 2,500 users against 4 % of 5,000 in 5 minutes: 4.3 standard errors
        stable(1000, 40) + candidate("canary", 500, 32),
        "CandidateModelRegression",
        "10m",
        [{"model": "v1", **ROLLBACK}],
    ),
    "candidate 1.6x stable over few users: chance could do it": (
        # 16 of 250 users against 20 of 500: 1.4 standard errors
        stable(100, 4) + candidate("canary", 50, 3.2),
        "CandidateModelRegression",
        "10m",
        [],
    ),
    "candidate 1.25x stable": (
        stable(100, 4) + candidate("canary", 50, 2.5),
        "CandidateModelRegression",
        "10m",
        [],
    ),
    "shadow errors count": (
        stable() + candidate("shadow", 20, 4),
        "CandidateModelRegression",
        "10m",
        [{"model": "v1", **ROLLBACK}],
    ),
    "pinned requests do not count": (
        stable() + candidate("pinned", 20, 10),
        "CandidateModelRegression",
        "10m",
        [],
    ),
    "one client retrying its failing request": (
        # 4 errors a minute on the canary, all one client's: one user who met an error
        stable()
        + [
            series(REQ, "0+20x60", model="v1", route="canary"),
            series(ERR, "0+4x60", model="v1", route="canary"),
            series(VOICES[REQ], "0+17x60", model="v1", route="canary"),
            series(VOICES[ERR], "0+0.2x60", model="v1", route="canary"),
        ],
        "CandidateModelRegression",
        "10m",
        [],
    ),
    "too few candidate users with an error": (
        # every one of its 5 users met an error, but 5 users are not 10
        stable() + candidate("canary", 1, 1),
        "CandidateModelRegression",
        "10m",
        [],
    ),
    "canary at 100 %, healthy": (
        candidate("canary", 100, 0.5),
        "CandidateModelRegression",
        "10m",
        [],
    ),
    "canary at 100 %, failing": (
        candidate("canary", 100, 5),
        "CandidateModelRegression",
        "10m",
        [{"model": "v1", **ROLLBACK}],
    ),
    "still pending before for:": (
        stable() + candidate("canary", 20, 4),
        "CandidateModelRegression",
        "2m",
        [],
    ),
    "slow candidate": (
        latency("v0", "stable", 200, 0.05) + latency("v1", "canary", 150, 2.5),
        "CandidateLatencyRegression",
        "15m",
        [{"model": "v1", **ROLLBACK}],
    ),
    "10x slower but under the 50 ms floor": (
        latency("v0", "stable", 200, 0.005) + latency("v1", "canary", 150, 0.05),
        "CandidateLatencyRegression",
        "15m",
        [],
    ),
    "slow candidate, but a p99 of few requests": (
        # 250 canary requests in 5 minutes: its p99 rests on two or three of them
        latency("v0", "stable", 200, 0.05) + latency("v1", "canary", 50, 2.5),
        "CandidateLatencyRegression",
        "15m",
        [],
    ),
    "unhappy users on the candidate": (
        stable() + candidate("canary", 20, 0) + feedback("v0", 19, 1) + feedback("v1", 1, 1),
        "CandidateNegativeFeedback",
        "50m",
        [{"model": "v1", **ROLLBACK}],
    ),
    "feedback as good as stable": (
        stable() + candidate("canary", 20, 0) + feedback("v0", 19, 1) + feedback("v1", 19, 1),
        "CandidateNegativeFeedback",
        "50m",
        [],
    ),
    "stable already disliked, candidate near all thumbs-down": (
        # 70 % down on stable: 1.5x is out of reach; halfway to 100 % (85 %) is the bar
        stable() + candidate("canary", 20, 0) + feedback("v0", 3, 7) + feedback("v1", 0, 10),
        "CandidateNegativeFeedback",
        "50m",
        [{"model": "v1", **ROLLBACK}],
    ),
    "stable already disliked, candidate a little worse": (
        stable() + candidate("canary", 20, 0) + feedback("v0", 3, 7) + feedback("v1", 2, 8),
        "CandidateNegativeFeedback",
        "50m",
        [],
    ),
    "errors pushed by another job decide nothing": (
        # what `curl --data-binary @- pushgateway:9091/metrics/job/x` plants, as scraped
        stable()
        + with_voices(
            [
                series(REQ, "0+20x60", model="v1", route="canary", job="pushgateway"),
                series(ERR, "0+4x60", model="v1", route="canary", job="pushgateway"),
            ]
        ),
        "CandidateModelRegression",
        "10m",
        [],
    ),
    "thumbs-down pushed by another job decide nothing": (
        stable()
        + candidate("canary", 20, 0)
        + feedback("v0", 19, 1)
        + with_voices(
            [
                series(FB, "0+1x90", model="v1", value="1", job="pushgateway"),
                series(FB, "0+10x90", model="v1", value="-1", job="pushgateway"),
            ]
        ),
        "CandidateNegativeFeedback",
        "50m",
        [],
    ),
    "collect stale, score fresh": (
        [series(LAST, "0x300", stage="collect"), series(LAST, "0+60x300", stage="score")],
        "FlywheelHourlyStageStale",
        "4h",
        [{"stage": "collect", "severity": "warning"}],
    ),
    "judge missing for half the scored traces": (
        [
            series("flywheel_reward_missing_total", "0+50x120", component="judge"),
            series("flywheel_reward_missing_total", "0+100x120", component="context_recall"),
            series(RECORDS, "0+100x120", stage="score", outcome="in"),
        ],
        "FlywheelRewardComponentMissing",
        "30m",
        [{"component": "judge", "severity": "warning"}],
    ),
    "judge missing for 5 % of the scored traces": (
        [
            series("flywheel_reward_missing_total", "0+5x120", component="judge"),
            series(RECORDS, "0+100x120", stage="score", outcome="in"),
        ],
        "FlywheelRewardComponentMissing",
        "30m",
        [],
    ),
    "a failed curate run": (
        [
            series(
                "flywheel_stage_runs_total", "0 0 0 1 1 1 1 1 1 1", stage="curate", status="failure"
            )
        ],
        "FlywheelStageFailing",
        "6m",
        [{"stage": "curate", "severity": "warning"}],
    ),
}


def _rules_without_annotations(tmp_path: Path) -> Path:
    data = copy.deepcopy(yaml.safe_load(RULES.read_text()))
    for group in data["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_alert_behaviour(case: str, tmp_path: Path) -> None:
    check_alert(CASES[case], tmp_path)


def check_alert(
    case: tuple[list[dict[str, str]], str, str, list[dict[str, str]]], tmp_path: Path
) -> None:
    """``promtool test rules``: the series ``case`` plants fire exactly the expected alerts."""
    promtool = tool("promtool")
    inputs, alert, at, expected = case
    test = {
        "rule_files": [str(_rules_without_annotations(tmp_path))],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": alert,
                        "exp_alerts": [{"exp_labels": e} for e in expected],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(test))
    out = run(promtool, "test", "rules", str(path))
    assert out.returncode == 0, out.stdout + out.stderr


def test_rollback_alert_summary_names_the_candidate(tmp_path: Path) -> None:
    promtool = tool("promtool")
    rule = next(r for r in rules() if r["alert"] == "CandidateModelRegression")
    annotations = {
        **rule["annotations"],
        "summary": SUMMARY,
    }
    test = {
        "rule_files": [str(RULES)],
        "tests": [
            {
                "interval": "1m",
                "input_series": stable() + candidate("canary", 20, 4),
                "alert_rule_test": [
                    {
                        "eval_time": "10m",
                        "alertname": "CandidateModelRegression",
                        "exp_alerts": [
                            {
                                "exp_labels": {"model": "v1", **ROLLBACK},
                                "exp_annotations": annotations,
                            }
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(test))
    out = run(promtool, "test", "rules", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
