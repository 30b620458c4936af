"""`flywheel run` end to end, with Python networking limited to loopback: the base model is
bootstrapped here on the demo's two workloads (calculator and clock), users with personal data
talk to both agents through the gateway, and one cycle of collect -> score -> curate, then
train -> release for each workload on its own, must ship for each a candidate that is better
on its own golden set with p < 0.05, routed to that workload alone, with no personal value
left in the training table."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from infra.catalog import open_catalog, scan
from infra.routing import load_state
from infra.serving.local_lm import LocalLM, render_prompt
from infra.serving.models import fetch_model, model_cache_root
from infra.settings import get_settings
from infra.store import open_store
from tasks.demo import domain

# the timeout guards against a hang, not a slow machine: the whole loop (3,200 requests, two
# trainings, two releases) took 603 s of wall beside three other workers and the vLLM lane on two
# cores (CI-9), and stop 57's CI machine ran it past `make test`'s 900 s
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.longest, pytest.mark.timeout(1500)]

EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
CARD = re.compile(r"\b(?:\d[ -]?){13,16}\b")


def test_one_cycle_ships_a_better_model_per_workload_offline(
    prefect_api: None,
    flywheel_home: Any,
    shared_bootstrap: Any,
    no_network: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.loop import LoopOptions, run_loop
    from tasks.demo.loop_summary import loop_report

    # this test runs beside other test workers on two cores: a burst of theirs that lands on
    # a canary step's dozen candidate requests reads as a slower candidate (one run: p99 1.97x
    # stable's on 2 of 11 requests, rolled back). The p99 rail here only catches a candidate
    # five times slower; the rail itself is tests/unit/test_release_latency.py's and the
    # serial vLLM test's
    monkeypatch.setenv("FLYWHEEL_RELEASE__LATENCY_P99_RATIO_MAX", "5")
    get_settings.cache_clear()
    started = time.perf_counter()
    summary = run_loop(LoopOptions(seed=0))
    print(loop_report(summary), f"\n(wall {time.perf_counter() - started:.0f} s)")

    assert set(summary.base_accuracy_by_workload) == {"calculator", "clock"}
    for accuracy in summary.base_accuracy_by_workload.values():
        assert 0.20 <= accuracy <= 0.75  # each agent starts with room to improve
    cycles = {c.workload: c for c in summary.cycles}
    assert set(cycles) == {"calculator", "clock"} and len(summary.cycles) == 2
    assert cycles["calculator"].traces >= 1000 and cycles["calculator"].pii_entities > 0
    for workload, cycle in cycles.items():
        assert cycle.pairs >= 50, workload
        assert cycle.decision == "PROCEED_TO_SHADOW", (workload, cycle.reasons)
        assert cycle.p_value is not None and cycle.p_value < 0.05, workload
        assert cycle.candidate_accuracy > cycle.baseline_accuracy, workload
        assert cycle.outcome == "promoted", (workload, cycle.reasons)
    assert cycles["calculator"].candidate != cycles["clock"].candidate

    settings = get_settings()
    store = open_store(settings)
    state = load_state(store)
    # each workload routes to its own candidate; the shared release (other traffic) stays v0
    assert state.release_of("calculator").stable == cycles["calculator"].candidate
    assert state.release_of("clock").stable == cycles["clock"].candidate
    assert state.stable == "v0"
    catalog = open_catalog(settings)
    examples = scan(catalog, "training_examples").to_pylist()
    assert examples
    for row in examples:
        text = " ".join([row["question"], row["answer"], *row["contexts"]])
        assert not EMAIL.search(text) and not CARD.search(text), "personal data leaked"
    audit = scan(catalog, "audit_log").to_pylist()
    events = {r["event_type"] for r in audit}
    assert {"model_trained", "release_transition"} <= events
    assert any(e.startswith("curate.") for e in events)
    for cycle in cycles.values():
        promoted = [
            r
            for r in audit
            if r["event_type"] == "release_transition"
            and r["subject"] == cycle.candidate
            and "promoted" in r["details"]
        ]
        assert promoted, f"the promotion of {cycle.candidate} is not in the audit log"

    # every release reached the canary and recorded the gate beside the canary's outcome
    outcomes = {r["workload"]: r for r in scan(catalog, "release_outcomes").to_pylist()}
    assert set(outcomes) == {"calculator", "clock"}
    for workload, cycle in cycles.items():
        row = outcomes[workload]
        assert (row["version"], row["outcome"]) == (cycle.candidate, "promoted")
        assert row["offline_gain"] and row["golden_version"] and row["requests_candidate"] > 0

    # the served base model answers the same with or without a personal preamble
    lm = LocalLM.load(fetch_model(store, "v0", model_cache_root(settings)))
    golden = domain.load_golden()[:100]
    plain = lm.generate_batch(
        [render_prompt([{"role": "user", "content": g.question}]) for g in golden]
    )
    preamble = "Hi, I'm Jane Roe, card 4111 1111 1111 1111, jane.roe@example.com."
    leaky = lm.generate_batch(
        [render_prompt([{"role": "user", "content": f"{preamble} {g.question}"}]) for g in golden]
    )
    assert [p.text for p in plain] == [q.text for q in leaky]
