"""Distillation's pure parts: the embedded student profiles are each at most a quarter of their
teacher, and the non-inferiority test passes an A/A comparison and fails a student five
points worse at a margin of two."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from infra.serving.answers import Answer, Messages
from infra.serving.local_lm import LocalLM
from infra.settings.distil import DEFAULT_STUDENTS, PROFILE_STUDENT
from tasks.release.gate.noninferiority import (
    GateCost,
    decide_noninferior,
    gate_cost,
    noninferiority_test,
)


@pytest.mark.parametrize("profile", ["demo", "llama"])
def test_each_embedded_student_is_at_most_a_quarter_of_its_teacher(profile: str) -> None:
    from tasks.demo.pretrain import BootstrapConfig, fresh_model
    from tasks.demo.workloads import CALCULATOR, CLOCK
    from tasks.distil.student import parameter_count, student_config

    tok, teacher = fresh_model(BootstrapConfig.for_profile(profile, (CALCULATOR, CLOCK)), 0)
    student = DEFAULT_STUDENTS[PROFILE_STUDENT[profile]]
    cfg = student_config(teacher.config, student, vocab_size=len(tok))
    teacher_n = sum(p.numel() for p in teacher.parameters())
    assert parameter_count(cfg) <= teacher_n / 4
    assert cfg.model_type == teacher.config.model_type  # the same family, served the same way


def _items(n: int, accuracy: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [1.0 if rng.random() < accuracy else 0.0 for _ in range(n)]


def test_an_identical_student_is_non_inferior() -> None:
    scores = _items(400, 0.7, seed=1)
    ni = noninferiority_test(scores, list(scores), margin=2.0)
    assert ni.non_inferior and not ni.inferior
    assert ni.p_value == 0.0 and ni.ci_low == ni.ci_high == 0.0


def test_a_student_as_good_on_other_items_is_non_inferior() -> None:
    """As accurate, but right on other items: 8 answers lost and 8 won of 400."""
    teacher = _items(400, 0.7, seed=2)
    right = [i for i, s in enumerate(teacher) if s == 1.0][:8]
    wrong = [i for i, s in enumerate(teacher) if s == 0.0][:8]
    student = [1.0 - s if i in right + wrong else s for i, s in enumerate(teacher)]
    ni = noninferiority_test(teacher, student, margin=2.0)
    assert ni.mean_diff == 0.0 and ni.non_inferior, ni.line()
    assert ni.ci_low < 0 < ni.ci_high


def test_a_student_five_points_worse_fails_at_margin_two() -> None:
    teacher = [1.0] * 300 + [0.0] * 100  # 75 %
    student = list(teacher)
    for i in range(0, 300, 15):  # 20 of 400 right answers lost: 5 points
        student[i] = 0.0
    ni = noninferiority_test(teacher, student, margin=2.0)
    assert ni.mean_diff == pytest.approx(-5.0)
    assert not ni.non_inferior and ni.p_value > 0.05
    assert ni.ci_low < -2.0  # the interval in the report says why


def test_the_gate_promotes_only_non_inferior_and_cheaper() -> None:
    from infra.settings import ReleaseSettings
    from tasks.release.gate.gate import Decision

    policy = ReleaseSettings()
    same = _items(200, 0.8, seed=3)
    ok = noninferiority_test(same, list(same), margin=2.0)
    cheaper = GateCost(baseline_s=0.01, candidate_s=0.002)
    dearer = GateCost(baseline_s=0.01, candidate_s=0.012)
    assert decide_noninferior(ok, cheaper, policy)[0] == Decision.PROCEED
    decision, reasons = decide_noninferior(ok, dearer, policy)
    assert decision == Decision.MANUAL_REVIEW and "not shown cheaper" in reasons[0]
    worse = noninferiority_test(same, [0.0] * 200, margin=2.0)
    assert worse.inferior
    assert decide_noninferior(worse, cheaper, policy)[0] == Decision.ROLLBACK


class Timed:
    """A version whose answers take ``scale`` x the item's own cost x the machine's load at that
    moment x noise; the load is 3x during a slow spell of turns, shared with the other version
    through ``clock`` (each call is one turn of the gate)."""

    version = "v"
    lm: LocalLM | None = None

    def __init__(self, scale: float, clock: list[int], noise: random.Random) -> None:
        self.scale, self.clock, self.noise = scale, clock, noise

    def answer(self, requests: Sequence[Messages], *, max_tokens: int) -> list[Answer]:
        self.clock[0] += 1
        spell = self.clock[1]
        load = 3.0 if spell <= self.clock[0] < spell + 5 else 1.0  # a slow spell, five turns
        return [
            Answer(
                "",
                self.scale * (0.5 + len(str(m)) % 7 / 7) * load * self.noise.lognormvariate(0, 0.3),
            )
            for m in requests
        ]


def _gate_cost(scale: float, noise: random.Random) -> GateCost:
    from tasks.release.gate.noninferiority import answer_alternating, turn_size

    clock = [0, noise.randrange(1, 22)]  # turns taken; where the slow spell starts
    requests: list[Messages] = [[{"role": "user", "content": "x" * i}] for i in range(200)]
    base, cand = answer_alternating(
        Timed(1.0, clock, noise), Timed(scale, clock, noise), requests, max_tokens=8
    )
    return gate_cost(base, cand, turn=turn_size(len(requests)))


def test_equal_costs_are_called_cheaper_in_about_alpha_of_gates_and_a_real_saving_in_all() -> None:
    """A/A: a student that costs what stable costs passes "cheaper" in about alpha (5 %) of
    gates (a comparison of the two means passes about half of them, each decided by where the
    slow spell fell), although a slow spell of the machine (3x, five turns) falls inside every
    gate; a student at 0.8x passes in nearly all (299 of 300 here)."""
    noise = random.Random(7)
    gates = 300
    aa = sum(_gate_cost(1.0, noise).cheaper for _ in range(gates))
    means = sum(
        g.candidate_s < g.baseline_s for g in (_gate_cost(1.0, noise) for _ in range(gates))
    )
    real = sum(_gate_cost(0.8, noise).cheaper for _ in range(gates))
    assert aa / gates < 0.10, aa
    assert 0.3 < means / gates < 0.7, means  # what the bound replaces
    assert real / gates > 0.97, real
    one = _gate_cost(0.8, noise)
    assert one.turns == 13 and one.median_ratio is not None and one.median_ratio < 1  # 200 / 16


def test_an_erasure_replacement_of_a_student_need_not_be_cheaper() -> None:
    from infra.settings import ReleaseSettings
    from tasks.release.gate.gate import Decision

    same = _items(200, 0.8, seed=4)
    ok = noninferiority_test(same, list(same), margin=2.0)
    dearer = GateCost(baseline_s=0.010, candidate_s=0.011)
    decision, reasons = decide_noninferior(ok, dearer, ReleaseSettings(), require_cheaper=False)
    assert decision == Decision.PROCEED and "not cheaper" in reasons[0]


def test_the_loop_summary_names_verdict_margin_p_and_both_costs() -> None:
    from infra.metrics.cost import CostStats
    from tasks.demo.distil_summary import DistilSummary, distil_lines
    from tasks.demo.loop_summary import CycleSummary, LoopSummary, not_promoted
    from tasks.release.machine.outcome import ReleaseOutcome

    d = DistilSummary(
        workload="calculator",
        teacher="v1",
        status="trained",
        message="",
        student="v3",
        student_profile="demo-small",
        examples=900,
        teacher_accuracy=0.64,
        student_accuracy=0.71,
        teacher_parameters=822_400,
        student_parameters=171_936,
    )
    test = {"margin": 2.0, "p_value": 1e-6, "mean_diff": 7.0, "ci_low": 4.1, "ci_high": 9.9}
    ni = {"test": test, "cost": {"ratio": 0.31}}
    gate = {"decision": "PROCEED_TO_SHADOW", "noninferiority": ni}
    released = ReleaseOutcome(version="v3", workload="calculator", outcome="promoted", gate=gate)
    d.add_release(
        released,
        # the teacher's answers mostly shared batches of 5-8, the student's came alone
        teacher=CostStats(
            requests=100,
            tokens_in=2000,
            tokens_out=300,
            compute_s=1.2,
            by_batch={"1": (10, 0.1), "5-8": (90, 1.1)},
        ),
        student=CostStats(
            requests=50, tokens_in=1000, tokens_out=150, compute_s=0.2, by_batch={"1": (50, 0.2)}
        ),
    )
    text = "\n".join(distil_lines([d]))
    assert "teacher v1 64.0%, student 71.0%" in text
    assert "margin 2, one-sided p = 1e-06 (PROCEED_TO_SHADOW)" in text
    assert "student 0.31x the teacher's compute per golden answer" in text
    assert "teacher 12.00 s compute" in text and "student 4.00 s compute" in text
    assert d.cost_ratio == pytest.approx(1 / 3)
    assert "(0.33x the teacher's compute, 0.40x at the same batch sizes)" in text
    cycle = CycleSummary(cycle=1, baseline="v0", candidate="v1", outcome="promoted")
    summary = LoopSummary(
        base_version="v0", base_accuracy=0.5, bootstrap_cached=True, cycles=[cycle], wall_s=1.0
    )
    summary.distilled = [d]
    assert not_promoted(summary) is None
    d.outcome = "rolled_back"
    assert "no student was promoted (v3: rolled_back)" in (not_promoted(summary) or "")


def test_a_student_not_shown_cheaper_is_held_for_a_person_who_resumes_it_as_a_student(
    tmp_path: Path,
) -> None:
    """No worse than stable, but its turns at the gate were not cheaper (7 of 13): the release
    is held (not rejected: it may be released again), the reason says what a person can do,
    and ``flywheel resume`` continues it as a non-inferiority release, with its margin in the
    shadow phase and the cost rail in the canary."""
    from infra.routing import RoutingState, StoreRouting, save_state
    from infra.settings import ReleaseSettings
    from infra.store import LocalStore
    from tasks.release.gate.noninferiority import NonInferiorGate
    from tasks.release.gate.report import gate_evidence
    from tasks.release.machine import controls, machine, transitions
    from tasks.release.options import ReleaseOptions, continued_options
    from tests.helpers import gate_result

    routing = StoreRouting(LocalStore(tmp_path / "store"))
    save_state(routing.store, RoutingState(stable="v0"))
    transitions.begin_release(routing, None, "v1", actor="test")
    policy = ReleaseSettings(shadow_fraction=0.2)
    same = _items(200, 0.8, seed=4)
    ni = noninferiority_test(same, list(same), margin=2.0)
    cost = GateCost(baseline_s=0.010, candidate_s=0.0098, turns=13, cheaper_turns=7, p_value=0.5)
    decision, reasons = decide_noninferior(ni, cost, policy)
    result = gate_result("v1", same, list(same))
    result.decision, result.reasons = decision, reasons
    result.noninferiority = NonInferiorGate(
        decision=decision, reasons=reasons, test=ni, cost=cost
    ).summary()

    held = machine.apply_gate(
        routing, None, result, gate=gate_evidence(result, {}), policy=policy, actor="test"
    )
    assert (held.phase, held.candidate) == ("held", "v1") and "v1" not in held.rejected
    why = held.history[-1].reason
    assert "not shown cheaper" in why and "7 of 13 turns" in why, why
    assert any("flywheel resume" in r and "flywheel abort" in r for r in reasons)

    resumed = controls.resume(routing, None, actor="person", handover=True)
    assert (resumed.phase, resumed.shadow_fraction) == ("shadow", 0.2)
    opts = continued_options(ReleaseOptions(actor="person"), resumed, "v1")
    assert opts.non_inferior and opts.margin == 2.0 and opts.cheaper
    student = opts.policy(policy)
    assert student.noninferiority_margin == 2.0 and student.cost_ratio_max == 1.0
