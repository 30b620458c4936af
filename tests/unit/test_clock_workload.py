"""The demo's second workload, the clock agent: its verifier, its golden set (held out from
what the simulator and pre-training draw), and its traffic tagged apart from the calculator's."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from tasks.demo import clock, verifier, workloads
from tasks.demo.simulate import build_population, plan_requests
from tasks.golden import verify_manifest

Q = "What time is it 45 minutes after 10:30?"


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("11:15", 1.0),
        (" It is 11:15.", 1.0),
        ("10:30 + 45 min = 11:15", 1.0),
        ("11:16", 0.0),  # a near miss is wrong
        ("11:15 or 11:20", 0.0),  # so is a hedge
        ("11:75", 0.0),
        ("", 0.0),
        ("I don't know", 0.0),
    ],
)
def test_the_clock_verifier_wants_exactly_the_right_time(answer: str, score: float) -> None:
    assert clock.verify(Q, answer) == score
    trace = SimpleNamespace(question=Q, contexts=[], answer=answer, reference=None)
    assert verifier.clock(trace) == {"score": score, "reference": "11:15"}


def test_the_clock_verifier_cannot_tell_on_a_calculator_question() -> None:
    trace = SimpleNamespace(question="What is 2+3?", contexts=[], answer="5", reference=None)
    assert verifier.clock(trace)["score"] is None


def test_golden_clock_questions_are_never_simulated_nor_pretrained() -> None:
    verify_manifest(workloads.golden_dir(workloads.CLOCK))
    items = workloads.golden_items(workloads.CLOCK)
    assert len(items) == clock.GOLDEN_SIZE
    assert {it.workload for it in items} == {"clock"}
    golden = {it.operands for it in items}
    rng = random.Random(7)
    drawn = [clock.sample_question(rng) for _ in range(3000)]
    assert not golden & {it.operands for it in drawn}
    assert all(workloads.is_golden_question(it.question) for it in items)  # decontamination
    assert not any(workloads.is_golden_question(it.question) for it in drawn)


def test_with_two_workloads_each_request_names_its_agent() -> None:
    users = build_population(20, seed=0)
    both = plan_requests(users, requests=300, seed=1, demo_workloads=workloads.WORKLOADS)
    assert {r.workload for r in both} == {"calculator", "clock"}
    by_index = {r.index: r for r in both}
    for r in both:
        assert r.workload == workloads.workload_of(r.item)
        if r.follows is not None:  # a follow-up stays with its conversation's agent
            assert by_index[r.follows].workload == r.workload
    alone = plan_requests(users, requests=50, seed=1)
    assert {r.workload for r in alone} == {None}
    assert {r.item.workload for r in alone} == {"calculator"}
