"""The ``release`` and ``rollback`` flows through real Prefect runs: the golden gate over HTTP
upstreams (fake OpenAI servers whose answers to the demo domain are right with a set
accuracy), its report against ``eval_results``, and a whole release (gate -> shadow -> canary
-> promoted) through a running gateway with user traffic, analysed from its /metrics."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from infra.catalog import open_catalog, scan
from infra.gateway.parts import Intervals
from infra.routing import RoutingState, load_state, save_state
from infra.settings import get_settings
from infra.store import open_store
from tasks.demo import domain
from tests.fakes.upstream import FakeUpstreamHandle, start_fake_upstream

pytestmark = [pytest.mark.integration, pytest.mark.waits]  # mostly waits on the clock

TOKEN = "test-admin-token-0123456789abcdef0123"
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}
ACCURACY = {"v0": 0.5, "v1": 0.95, "v2": 0.1, "v3": 0.5}  # v3 answers exactly as v0


def answerer(accuracy: float):
    """Right when the question's (version-independent) draw is under ``accuracy``, so a more
    accurate version is right wherever a less accurate one is."""

    def answer(messages: list[dict[str, Any]]) -> str:
        question = next(m["content"] for m in messages if m["role"] == "user")
        right = int(domain.expected_answer(question))
        return str(right) if random.Random(question).random() < accuracy else str(right + 1)

    return answer


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstreamHandle]]:
    handles = {v: start_fake_upstream(v, answer=answerer(a)) for v, a in ACCURACY.items()}
    yield handles
    for handle in handles.values():
        handle.stop()


@pytest.fixture
def env(flywheel_home, upstreams, monkeypatch: pytest.MonkeyPatch):
    urls = {v: h.url for v, h in upstreams.items()}
    monkeypatch.setenv("FLYWHEEL_GATEWAY__UPSTREAMS", json.dumps(urls))
    monkeypatch.setenv("FLYWHEEL_GATEWAY__DIVERSE_FRACTION", "0")
    monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_TOKEN", TOKEN)
    get_settings.cache_clear()
    settings = get_settings()
    save_state(open_store(settings), RoutingState(stable="v0"))
    return settings


def options(**kw: Any):
    from flows.release import ReleaseOptions

    return ReleaseOptions(max_golden_items=kw.pop("max_golden_items", 100), **kw)


def store_metrics(settings) -> bytes:
    return open_store(settings).get("metrics/release.json")


def audit(settings, event_type: str | None = None) -> list[dict[str, Any]]:
    rows = scan(open_catalog(settings), "audit_log").to_pylist()
    rows = [r for r in rows if event_type is None or r["event_type"] == event_type]
    return sorted(rows, key=lambda r: r["at"])


def test_gate_rejects_a_worse_candidate_with_a_report_matching_eval_results(
    prefect_api, env
) -> None:
    from flows.release import release

    out = release("v2", options())
    assert (out.outcome, out.gate["decision"]) == ("rolled_back", "ROLLBACK")
    store = open_store(env)
    state = load_state(store)
    assert state.rejected == ["v2"] and state.candidate is None
    report = json.loads(store.get("gates/v2/report.json"))
    assert store.get("gates/v2/report.md").startswith(b"# Release gate: v2 vs v0")
    assert store.get("gates/v2/scores.png").startswith(b"\x89PNG")
    from tasks.golden import GOLDEN_DIR, golden_version

    assert report["golden_version"] == golden_version(GOLDEN_DIR)  # the set it was decided on
    assert (
        f"| golden set version | {report['golden_version']} |"
        in store.get("gates/v2/report.md").decode()
    )
    from pyiceberg.expressions import EqualTo

    rows = scan(open_catalog(env), "eval_results", EqualTo("run_id", report["run_id"])).to_pylist()
    assert len(rows) == 200
    for version, key in (("v0", "mean_baseline"), ("v2", "mean_candidate")):
        scores = [r["score"] for r in rows if r["model_version"] == version]
        assert sum(scores) / len(scores) == pytest.approx(report["test"][key])
    by_item = {(r["item_id"], r["model_version"]): r["score"] for r in rows}
    for item in report["items"]:
        assert by_item[(item["item_id"], "v2")] == pytest.approx(item["candidate_score"])
    assert {r["event_type"] for r in audit(env)} >= {"release_transition", "rollback"}
    metrics = store.get("metrics/release.json")  # flywheel_gate_decisions_total{decision}
    assert b"flywheel_gate_decisions_total" in metrics and b"ROLLBACK" in metrics
    again = release("v2", options())
    assert again.outcome == "rejected" and again.gate is None  # never released again


def test_gate_holds_an_identical_copy_for_review(prefect_api, env) -> None:
    from flows.release import release

    out = release("v3", options())
    assert (out.outcome, out.gate["decision"]) == ("held", "MANUAL_REVIEW")
    assert out.gate["p_value"] == 1.0 and out.gate["mean_diff"] == 0.0
    state = load_state(open_store(env))
    assert (state.phase, state.candidate, state.weight) == ("held", "v3", 0.0)


@dataclass
class Traffic:
    """Users asking non-golden questions through the gateway until stopped."""

    url: str
    statuses: Counter = field(default_factory=Counter)
    routes: Counter = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        rng = random.Random(7)
        with httpx.Client(base_url=self.url, timeout=10) as client:
            while not self.stop.is_set():
                item = domain.sample_question(rng)
                body = {
                    "model": "flywheel",
                    "user": f"user-{rng.randrange(500)}",
                    "messages": [
                        {"role": "user", "content": item.question},
                        {"role": "tool", "content": item.contexts[0]},
                    ],
                }
                # the route is named to requests with the admin token only (never to users)
                began = time.monotonic()
                try:
                    resp = client.post("/v1/chat/completions", json=body, headers=OPERATOR)
                except httpx.TransportError as exc:  # counted by kind and time taken; the next
                    # request is the retry the openai SDK would make
                    took = time.monotonic() - began
                    self.statuses[f"transport error: {type(exc).__name__} after {took:.1f} s"] += 1
                    continue
                self.statuses[resp.status_code] += 1
                self.routes[resp.headers.get("x-flywheel-route")] += 1
                self.stop.wait(0.02)


def test_release_goes_through_shadow_and_canary_to_promoted(prefect_api, env) -> None:
    from flows.release import release
    from infra.gateway.serve import start_background_gateway

    with start_background_gateway(env, port=0, intervals=Intervals(state_s=0.1, flush_s=0.2)) as gw:
        traffic = Traffic(str(gw.admin_url))  # the operator sees routes
        thread = threading.Thread(target=traffic.run, daemon=True)
        thread.start()
        try:
            out = release(
                "v1",
                options(
                    shadow_fraction=0.5,
                    min_shadow_pairs=15,
                    analysis_interval_s=3,
                    step_deadline_s=30,
                    canary_steps=[50, 100],
                    min_requests_per_step=10,
                    gateway_url=gw.url,
                    admin_url=gw.admin_url,
                ),
            )
        finally:
            traffic.stop.set()
            thread.join(10)
    assert out.outcome == "promoted", out
    assert out.gate["decision"] == "PROCEED_TO_SHADOW" and out.gate["p_value"] < 0.05
    assert [p["verdict"] for p in out.phases] == ["pass", "pass", "pass"]
    state = load_state(open_store(env))
    assert (state.stable, state.candidate, state.phase) == ("v1", None, "promoted")
    assert set(traffic.statuses) == {200} and traffic.routes["canary"] > 0
    steps = [json.loads(r["details"]) for r in audit(env, "release_transition")]
    assert [s["to_phase"] for s in steps] == ["gating", "shadow", "canary", "canary", "promoted"]
    shadow = steps[2]["evidence"]["shadow"]
    assert (
        shadow["pairs"] >= 15 and shadow["test"]["mean_candidate"] > shadow["test"]["mean_baseline"]
    )
    assert steps[3]["evidence"]["previous_step"]["source"] == "embedded"
    (outcome,) = scan(open_catalog(env), "release_outcomes").to_pylist()  # gate beside canary
    assert (outcome["version"], outcome["baseline"], outcome["outcome"]) == ("v1", "v0", "promoted")
    assert outcome["release_id"] == state.release_id and outcome["workload"] == "default"
    assert outcome["offline_reward_diff"] == pytest.approx(out.gate["mean_diff"])
    assert outcome["golden_accuracy_candidate"] > outcome["golden_accuracy_baseline"]
    assert outcome["golden_version"] and outcome["offline_gain"]
    assert outcome["requests_candidate"] > 0 and outcome["requests_stable"] > 0
    assert outcome["canary_start"] < outcome["canary_end"]
    assert not outcome["contradicts"]
    assert b"flywheel_release_contradictions_in_row" in store_metrics(env)


def test_canary_step_without_traffic_does_not_pass(prefect_api, env) -> None:
    from flows.release import release
    from infra.gateway.serve import start_background_gateway

    with start_background_gateway(env, port=0, intervals=Intervals(state_s=0.1)) as gw:
        out = release(
            "v1",
            options(
                skip_shadow=True,
                analysis_interval_s=1,
                step_deadline_s=4,
                canary_steps=[50, 100],
                min_requests_per_step=5,
                gateway_url=gw.url,
                admin_url=gw.admin_url,
            ),
        )
    assert out.outcome == "held", out
    assert out.phases == [
        {"phase": "canary", "step": 0, "weight": 50, "verdict": "no_data", "reasons": out.reasons}
    ]
    assert "0 candidate requests < 5 required" in out.reasons[0]
    state = load_state(open_store(env))
    assert (state.phase, state.candidate, state.weight, state.stable) == ("held", "v1", 0.0, "v0")


def test_rollback_flow_goes_through_the_gateway_admin_api(
    prefect_api, env, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.rollback import rollback
    from infra.gateway.serve import start_background_gateway

    store = open_store(env)
    save_state(
        store, RoutingState(stable="v0", candidate="v1", phase="canary", weight=50), force=True
    )
    with start_background_gateway(env, port=0, intervals=Intervals(state_s=0.1)) as gw:
        monkeypatch.setenv("FLYWHEEL_GATEWAY__URL", gw.url)
        monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_URL", gw.admin_url or "")
        get_settings.cache_clear()
        out = rollback(reason="latency looks wrong", actor="oncall")
        health = gw.app.state.parts.watcher.state  # what the gateway routes by now
        again = rollback(reason="again", actor="oncall")
        for thread in gw.app.state.admin.threads:  # the gateway's audit write
            thread.join(10)
    assert (out["rolled_back"], out["via"]) == (True, "gateway")
    assert (health.weight, health.candidate) == (0.0, None)
    state = load_state(store)
    assert state.rejected == ["v1"] and state.phase == "rolled_back"
    events = {r["event_type"]: r for r in audit(env)}
    assert events["rollback"]["actor"] == "oncall"
    assert json.loads(events["rollback"]["details"])["reason"] == "latency looks wrong"
    assert json.loads(events["rollback_flow"]["details"])["via"] == "gateway"
    assert (again["rolled_back"], again["via"]) == (False, "gateway")  # idempotent


def test_resume_continues_a_paused_canary_to_promotion(prefect_api, env) -> None:
    """``release-control resume`` does not only flip the state: it drives the canary analysis
    on to promotion (the release flow as its subflow), seen through the Prefect API."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.client.schemas.objects import StateType

    from flows.release_control import release_control
    from infra.gateway.serve import start_background_gateway
    from infra.routing import StoreRouting
    from tasks.release.machine import controls

    store = open_store(env)
    canary = RoutingState(stable="v0", candidate="v1", phase="canary", weight=50, step=0)
    save_state(store, canary, force=True)
    controls.pause(StoreRouting(store), open_catalog(env), actor="oncall", reason="dashboards")
    assert load_state(store).phase == "held"
    with start_background_gateway(env, port=0, intervals=Intervals(state_s=0.1, flush_s=0.2)) as gw:
        operator = {"Authorization": f"Bearer {TOKEN}"}  # only an operator names the candidate
        for version in ("v0", "v1", "v0", "v1"):  # warm both upstreams (pinned: not analysed)
            body = {"model": version, "messages": [{"role": "user", "content": "1 + 1 = ?"}]}
            url = f"{gw.admin_url}/v1/chat/completions"  # the operator's listener
            assert httpx.post(url, json=body, headers=operator).status_code == 200
        traffic = Traffic(str(gw.admin_url))  # the operator sees routes
        thread = threading.Thread(target=traffic.run, daemon=True)
        thread.start()
        try:
            opts = options(
                canary_steps=[50, 100],
                analysis_interval_s=2,
                step_deadline_s=30,
                min_requests_per_step=5,
                gateway_url=gw.url,
                admin_url=gw.admin_url,
            )
            final = release_control(
                "resume", reason="dashboards fine", actor="oncall", options=opts, return_state=True
            )
        finally:
            traffic.stop.set()
            thread.join(10)
    flow_run_id = final.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
        children = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])
            )
        )
    assert run.state is not None and run.state.type == StateType.COMPLETED
    assert [(c.name is not None, c.state_type) for c in children] == [
        (True, StateType.COMPLETED)
    ]  # the release flow, run as its subflow
    status = final.result()
    assert status["release"]["outcome"] == "promoted"
    state = load_state(store)
    assert (state.stable, state.candidate, state.phase) == ("v1", None, "promoted")
    steps = [json.loads(r["details"]) for r in audit(env, "release_transition")]
    assert [s["to_phase"] for s in steps] == ["held", "canary", "canary", "promoted"]
    assert steps[1]["evidence"] == {"handover": True} and steps[1]["weight"] == 50
    assert steps[2]["weight"] == 90 and steps[2]["evidence"]["previous_step"]["step"] == 0
    assert traffic.routes["canary"] > 0
