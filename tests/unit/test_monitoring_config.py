"""Alert rules, Prometheus/Alertmanager configs and the Grafana dashboard, checked with the real
tools (promtool and amtool from Debian's prometheus / prometheus-alertmanager packages, which
.ci/run installs) and against the metric names of DESIGN "Metrics"."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "infra/prometheus/rules.yml"
PROMETHEUS = ROOT / "infra/prometheus/prometheus.yml"
ALERTMANAGER = ROOT / "infra/alertmanager/alertmanager.yml"
DASHBOARD = ROOT / "infra/grafana/dashboards/flywheel.json"
DATASOURCE = ROOT / "infra/grafana/provisioning/datasources/prometheus.yml"

# DESIGN "Metrics": the only series rules and dashboards may read.
DESIGN_METRICS = {
    "flywheel_stage_runs_total",
    "flywheel_stage_duration_seconds",
    "flywheel_stage_records_total",
    "flywheel_stage_last_success_timestamp_seconds",
    "flywheel_reward",
    "flywheel_pii_entities_total",
    "flywheel_gate_decisions_total",
    "agent_requests_total",
    "agent_errors_total",
    "agent_latency_seconds",
    "user_feedback_total",
    "flywheel_route_weight",
    "flywheel_trace_sink_dropped_total",
}
# DESIGN "Metrics", "Also in use": rules may read these too (not required on the dashboard)
ALSO_IN_USE = {"flywheel_reward_missing_total"}
ALSO_IN_USE |= {  # issue 29: erasure reaching the models (tasks/governance/reach.py)
    f"flywheel_erasure_{n}" for n in ("oldest_pending_seconds", "deadline_seconds")
} | {"flywheel_erasure_replacement_failed"}
DESIGN_METRICS |= {  # issue 16: human review and monitors (tasks/review.py, tasks/monitors.py)
    f"flywheel_{n}"
    for n in "reward_human_spearman reward_human_samples review_queued_total train_entropy "
    "judge_feedback_agreement judge_feedback_pairs reward_length_spearman candidate_kl "
    "reward_length_samples answer_distinct_ratio answer_distinct_answers".split()
}
HISTOGRAMS = {"flywheel_stage_duration_seconds", "flywheel_reward", "agent_latency_seconds"}
BUILTINS = {"up", "ALERTS"}  # series Prometheus itself writes
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or"}
_KEYWORDS |= {"unless", "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression reads (histogram suffixes folded into the family)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\$\{?\w+\}?", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w:.])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()", s):
        name = m.group(1)
        if name.lower() in _KEYWORDS or re.fullmatch(r"\d.*", name):
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        names.add(base if base in HISTOGRAMS else name)
    return names


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not installed (Debian: prometheus / prometheus-alertmanager)")
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for var in dash.get("templating", {}).get("list", []):
        q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        exprs += re.findall(r"label_values\(([^,)]+)", q)
    return exprs


def test_metric_name_parser() -> None:
    expr = (
        'sum by (model, le) (rate(agent_latency_seconds_bucket{route="canary"}[$__rate_interval]))'
        " > on () group_left () 1.5 * clamp_min(vector(0) or agent_errros_total, 0.01) and up"
    )
    assert metric_names(expr) == {"agent_latency_seconds", "agent_errros_total", "up"}


def test_rules_pass_promtool_check() -> None:
    out = run(tool("promtool"), "check", "rules", str(RULES))
    assert out.returncode == 0, out.stdout + out.stderr


def test_rules_and_dashboard_read_only_design_metrics() -> None:
    used: dict[str, set[str]] = {}
    for rule in rules():
        used[rule["alert"]] = metric_names(rule["expr"]) - DESIGN_METRICS - ALSO_IN_USE - BUILTINS
    for i, expr in enumerate(dashboard_exprs()):
        used[f"dashboard query {i}: {expr}"] = metric_names(expr) - DESIGN_METRICS - BUILTINS
    assert not {k: v for k, v in used.items() if v}
    shown = set().union(*(metric_names(e) for e in dashboard_exprs()))
    assert DESIGN_METRICS <= shown, f"not on the dashboard: {DESIGN_METRICS - shown}"


def test_design_metrics_are_the_ones_the_code_emits() -> None:
    from infra.gateway.metrics import GatewayMetrics
    from infra.metrics import HELP

    gateway = {m.name for m in GatewayMetrics().registry.collect()}
    gateway = {n if n in DESIGN_METRICS else f"{n}_total" for n in gateway}
    assert gateway | set(HELP) >= DESIGN_METRICS


def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """Every dashboard query, with Grafana's variables filled in, passes promtool."""
    fill = {"$__rate_interval": "1m", "$__range": "1h", "$__interval": "1m", "$component": ".*"}
    records = []
    for i, expr in enumerate(e for e in dashboard_exprs() if "(" in e or "{" in e):
        for var, value in fill.items():
            expr = expr.replace(var, value)
        records.append({"record": f"dashboard:query_{i}", "expr": expr})
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    out = run(tool("promtool"), "check", "rules", str(path))
    assert out.returncode == 0, out.stdout + out.stderr


def test_dashboard_uses_the_provisioned_datasource() -> None:
    uid = yaml.safe_load(DATASOURCE.read_text())["datasources"][0]["uid"]
    dash = json.loads(DASHBOARD.read_text())
    refs = [p["datasource"]["uid"] for p in dash["panels"] if "datasource" in p]
    refs += [t["datasource"]["uid"] for p in dash["panels"] for t in p.get("targets", [])]
    assert refs and set(refs) == {uid}
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("stage", "reward", "pii", "gate", "latency", "error", "feedback", "weight"):
        assert topic in titles, f"no panel about {topic}"


def test_prometheus_config_passes_promtool_and_scrapes_rule_jobs() -> None:
    out = run(tool("promtool"), "check", "config", str(PROMETHEUS))
    assert out.returncode == 0, out.stdout + out.stderr
    jobs = {j["job_name"] for j in yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]}
    for rule in rules():
        for job in re.findall(r'job="([^"]+)"', rule["expr"]):
            assert job in jobs, f"{rule['alert']} reads job={job!r}, which is not scraped"


def test_release_alerts_roll_back_through_the_gateway() -> None:
    amtool = tool("amtool")
    out = run(amtool, "check-config", str(ALERTMANAGER))
    assert out.returncode == 0, out.stdout + out.stderr
    release = [r for r in rules() if r.get("labels", {}).get("action") == "rollback"]
    names = {r["alert"] for r in release}
    assert {"CandidateModelRegression", "CandidateLatencyRegression"} <= names
    assert "CandidateNegativeFeedback" in names
    for rule in rules():
        labels = [f"{k}={v}" for k, v in rule.get("labels", {}).items()]
        out = run(
            amtool,
            "config",
            "routes",
            "test",
            f"--config.file={ALERTMANAGER}",
            f"alertname={rule['alert']}",
            "model=v1",
            *labels,
        )
        receivers = set(out.stdout.strip().split(","))
        assert "ops" in receivers, rule["alert"]
        assert ("gateway-rollback" in receivers) == (rule["alert"] in names), rule["alert"]
    am = yaml.safe_load(ALERTMANAGER.read_text())
    rollback_route = next(r for r in am["route"]["routes"] if r["receiver"] == "gateway-rollback")
    assert (
        rollback_route["group_wait"] in ("0s", "1s", "5s") and "model" in rollback_route["group_by"]
    )
    hook = next(r for r in am["receivers"] if r["name"] == "gateway-rollback")["webhook_configs"][0]
    assert (
        hook["send_resolved"] is True and hook["http_config"]["authorization"]["type"] == "Bearer"
    )


# ---------------------------------------------------------------- alert behaviour (promtool)

REQ, ERR, LAT = "agent_requests_total", "agent_errors_total", "agent_latency_seconds_bucket"
FB, LAST = "user_feedback_total", "flywheel_stage_last_success_timestamp_seconds"
RECORDS = "flywheel_stage_records_total"
ROLLBACK = {"severity": "critical", "action": "rollback"}


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def latency(model: str, route: str, per_min: int, upto: float) -> list[dict[str, str]]:
    """Cumulative buckets of a histogram where every request takes at most ``upto`` seconds."""
    return [
        series(LAT, f"0+{per_min if float(le) >= upto else 0}x60", model=model, route=route, le=le)
        for le in ("0.005", "0.05", "0.1", "1", "2.5", "+Inf")
    ] + [series(REQ, f"0+{per_min}x60", model=model, route=route)]


def stable(per_min: int = 100, errors: float = 0) -> list[dict[str, str]]:
    out = [series(REQ, f"0+{per_min}x60", model="v0", route="stable")]
    return out + ([series(ERR, f"0+{errors}x60", model="v0", route="stable")] if errors else [])


def candidate(route: str, per_min: float, errors: float) -> list[dict[str, str]]:
    return [
        series(REQ, f"0+{per_min}x60", model="v1", route=route),
        series(ERR, f"0+{errors}x60", model="v1", route=route),
    ]


def feedback(model: str, up: int, down: int) -> list[dict[str, str]]:
    return [
        series(FB, f"0+{up}x90", model=model, value="1"),
        series(FB, f"0+{down}x90", model=model, value="-1"),
    ]


CASES: dict[str, tuple[list[dict[str, str]], str, str, list[dict[str, str]]]] = {
    # name: (input series, alert, eval time, expected alerts' labels)
    "errors on a candidate, none on stable": (
        stable() + candidate("canary", 20, 4),
        "CandidateModelRegression",
        "10m",
        [{"model": "v1", **ROLLBACK}],
    ),
    "candidate 1.6x stable": (
        stable(100, 4) + candidate("canary", 50, 3.2),
        "CandidateModelRegression",
        "10m",
        [{"model": "v1", **ROLLBACK}],
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
    "too few candidate requests": (
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
        latency("v0", "stable", 100, 0.05) + latency("v1", "canary", 50, 2.5),
        "CandidateLatencyRegression",
        "15m",
        [{"model": "v1", **ROLLBACK}],
    ),
    "10x slower but under the 50 ms floor": (
        latency("v0", "stable", 100, 0.005) + latency("v1", "canary", 50, 0.05),
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
        "summary": "Candidate v1 error ratio 20% is over 1.5x the stable version's",
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
