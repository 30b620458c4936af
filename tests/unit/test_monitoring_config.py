"""Alert rules, Prometheus/Alertmanager configs and the Grafana dashboard, checked with the real
tools (promtool and amtool from Debian's prometheus / prometheus-alertmanager packages, which
.ci/run installs) and against the metric names of DESIGN "Metrics". What the release and stage
alerts fire on is test_monitoring_alerts.py's."""

from __future__ import annotations

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
ALSO_IN_USE |= {"flywheel_pii_canary_recall"}  # issue 43: the canary check of every curate run
# issue 55: offline-online agreement per release (tasks/release/gate/agreement.py)
ALSO_IN_USE |= {"flywheel_release_contradictions_in_row"}
# issue 51: the release alerts count users, not events (infra/gateway/voices.py)
ALSO_IN_USE |= {"agent_voices_total", "agent_error_voices_total", "user_feedback_voices_total"}
ALSO_IN_USE |= {"flywheel_connections_refused_total"}  # connection limits (infra/gateway/edge.py)
DESIGN_METRICS |= {  # issue 16: human review and monitors (tasks/review.py, tasks/monitors.py)
    f"flywheel_{n}"
    for n in [
        "reward_human_spearman",
        "reward_human_samples",
        "review_queued_total",
        "train_entropy",
        "judge_feedback_agreement",
        "judge_feedback_pairs",
        "reward_length_spearman",
        "candidate_kl",
        "reward_length_samples",
        "answer_distinct_ratio",
        "answer_distinct_answers",
    ]
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
    """The alerting rules."""
    return [r for r in _all_rules() if "alert" in r]


def records() -> list[dict[str, Any]]:
    """The recording rules (the release alerts' shares and counts)."""
    return [r for r in _all_rules() if "record" in r]


def _all_rules() -> list[dict[str, Any]]:
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
    recorded = {r["record"] for r in records()}
    for rule in rules() + records():
        name = rule.get("alert") or rule["record"]
        used[name] = metric_names(rule["expr"]) - DESIGN_METRICS - ALSO_IN_USE - BUILTINS - recorded
    for i, expr in enumerate(dashboard_exprs()):
        used[f"dashboard query {i}: {expr}"] = metric_names(expr) - DESIGN_METRICS - BUILTINS
    assert not {k: v for k, v in used.items() if v}
    shown = set().union(*(metric_names(e) for e in dashboard_exprs()))
    assert shown >= DESIGN_METRICS, f"not on the dashboard: {DESIGN_METRICS - shown}"


def test_design_metrics_are_the_ones_the_code_emits() -> None:
    from infra.gateway.metrics import GatewayMetrics
    from infra.metrics.stage import HELP

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


def test_prometheus_config_passes_promtool_and_scrapes_rule_jobs(tmp_path: Path) -> None:
    # promtool opens the admin token's secret file, which compose mounts: a copy of the config
    # names a token file here instead, and nothing else changes
    shutil.copytree(PROMETHEUS.parent, tmp_path / "prometheus")
    token = tmp_path / "gateway_admin_token"
    token.write_text("t" * 32)
    config = tmp_path / "prometheus" / PROMETHEUS.name
    text = PROMETHEUS.read_text()
    assert "/run/secrets/gateway_admin_token" in text
    config.write_text(text.replace("/run/secrets/gateway_admin_token", str(token)))
    out = run(tool("promtool"), "check", "config", str(config))
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
            "workload=A",
            *labels,
        )
        receivers = set(out.stdout.strip().split(","))
        assert "ops" in receivers, rule["alert"]
        assert ("gateway-rollback" in receivers) == (rule["alert"] in names), rule["alert"]
    am = yaml.safe_load(ALERTMANAGER.read_text())
    rollback_route = next(r for r in am["route"]["routes"] if r["receiver"] == "gateway-rollback")
    assert rollback_route["group_wait"] in ("0s", "1s", "5s")
    # one notification per candidate and workload: A's alert never waits for B's batch
    assert {"model", "workload"} <= set(rollback_route["group_by"])
    hook = next(r for r in am["receivers"] if r["name"] == "gateway-rollback")["webhook_configs"][0]
    assert (
        hook["send_resolved"] is True and hook["http_config"]["authorization"]["type"] == "Bearer"
    )
