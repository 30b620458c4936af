"""The release gate's statistics, decision rule, drift checks and report (synthetic scores and
in-memory answer sources; the real stage-2 reward)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from infra.serving.answers import Answer
from infra.settings import ReleaseSettings
from tasks.golden import load_golden
from tasks.release.gate.drift import Check, diversity_check, length_bias_check
from tasks.release.gate.gate import (
    Decision,
    paired_test,
    run_gate,
    slice_results,
)
from tasks.release.gate.gate_inputs import GateInputs
from tasks.release.gate.report import report_json, report_markdown, report_plot
from tasks.release.gate.superiority import decide

CONFIG = ReleaseSettings(n_bootstrap=2000)


def bernoulli(n: int, p: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [1.0 if rng.random() < p else 0.0 for _ in range(n)]


def flip(scores: list[float], *, to: float, share: float, seed: int) -> list[float]:
    """Change ``share`` of the items not already at ``to`` into ``to``."""
    rng = random.Random(seed)
    return [to if s != to and rng.random() < share else s for s in scores]


BASE = bernoulli(200, 0.5, seed=1)


def test_really_better_candidate_proceeds_with_small_p() -> None:
    cand = flip(BASE, to=1.0, share=0.4, seed=2)
    test = paired_test(BASE, cand, n_bootstrap=2000)
    decision, reasons = decide(test, CONFIG)
    assert decision == Decision.PROCEED
    assert test.p_value < 0.05 and test.wilcoxon_p < 0.05
    assert 0 < test.ci_low <= test.mean_diff <= test.ci_high
    assert test.effect_size is not None and test.effect_size > 0
    assert "significantly better" in reasons[0]


def test_candidate_made_worse_is_rejected() -> None:
    cand = flip(BASE, to=0.0, share=0.3, seed=3)
    test = paired_test(BASE, cand, n_bootstrap=2000)
    assert test.mean_candidate < 0.95 * test.mean_baseline
    decision, reasons = decide(test, CONFIG)
    assert decision == Decision.ROLLBACK
    assert "0.95 x baseline" in reasons[0]


def test_a_draw_below_95_percent_that_is_not_significant_is_held_not_rejected() -> None:
    """Two answers of the same version, each item right at its own chance: the candidate's mean
    fell below 95 % of the baseline's by sampling alone (one golden set in seven of 400 items
    did in bench_release_decisions.py); without significance that is a hold, not a rejection."""
    rng = random.Random(7)
    chance = [rng.random() for _ in range(400)]
    runs = [
        ([float(rng.random() < q) for q in chance], [float(rng.random() < q) for q in chance])
        for _ in range(40)
    ]
    drawn = [(b, c) for b, c in runs if sum(c) < 0.95 * sum(b)]
    assert drawn  # the same version's draws do fall below 95 %
    for base, cand in drawn:
        test = paired_test(base, cand, n_bootstrap=200)
        decision, reasons = decide(test, CONFIG)
        if test.p_value >= CONFIG.alpha:
            assert decision == Decision.MANUAL_REVIEW, reasons
            assert "not significantly better" in reasons[0]


def test_identical_copy_goes_to_manual_review_without_nan() -> None:
    test = paired_test(BASE, list(BASE), n_bootstrap=2000)
    assert (test.p_value, test.wilcoxon_p, test.effect_size) == (1.0, 1.0, 0.0)
    assert (test.ci_low, test.ci_high, test.nonzero_pairs) == (0.0, 0.0, 0)
    assert decide(test, CONFIG)[0] == Decision.MANUAL_REVIEW


def test_small_gain_that_is_not_significant_is_held() -> None:
    cand = list(BASE)
    cand[BASE.index(0.0)] = 1.0  # one item better out of 200
    test = paired_test(BASE, cand, n_bootstrap=2000)
    assert test.p_value > 0.05
    assert decide(test, CONFIG)[0] == Decision.MANUAL_REVIEW


def test_every_difference_equal_counts_as_certain() -> None:
    test = paired_test([0.5] * 40, [0.6] * 40, n_bootstrap=500)
    assert test.p_value == 0.0 and test.effect_size is None
    assert decide(test, CONFIG)[0] == Decision.PROCEED


def test_too_few_samples_never_decide_automatically() -> None:
    base, cand = [0.0] * 10, [1.0] * 10
    decision, reasons = decide(paired_test(base, cand, n_bootstrap=500), CONFIG)
    assert decision == Decision.MANUAL_REVIEW
    assert "only 10 paired samples" in reasons[0]


def test_a_regressed_slice_blocks_an_overall_gain() -> None:
    slices = ["carry"] * 100 + ["no_carry"] * 100
    base = [0.5] * 100 + [0.8] * 100
    cand = [0.9] * 100 + [0.65] * 100  # much better on carry, 0.15 worse on no_carry
    test = paired_test(base, cand, n_bootstrap=500)
    per_slice = slice_results(
        slices, baseline=base, candidate=cand, tolerance=CONFIG.slice_tolerance
    )
    assert [s.regressed for s in per_slice] == [False, True]
    decision, reasons = decide(test, CONFIG, slices=per_slice)
    assert decision == Decision.MANUAL_REVIEW
    assert any("slice no_carry regressed by 0.1500" in r for r in reasons)


def test_a_failed_drift_check_blocks_proceeding() -> None:
    test = paired_test(BASE, flip(BASE, to=1.0, share=0.5, seed=4), n_bootstrap=500)
    failed = Check(
        name="kl",
        status="fail",
        value=3.2,
        threshold=1.0,
        detail="KL 3.2000 nats/token (max 1.0)",
        extra={},
    )
    decision, reasons = decide(test, CONFIG, checks=[failed])
    assert decision == Decision.MANUAL_REVIEW
    assert any("kl check failed" in r and "3.2" in r for r in reasons)


def test_diversity_check_catches_mode_collapse_only_when_it_is_new() -> None:
    refs = [str(n) for n in range(100)]
    varied = [str(n + 1) for n in range(100)]
    collapsed = ["42"] * 100
    cfg = ReleaseSettings()
    assert diversity_check(varied, varied, references=refs, policy=cfg).status == "pass"
    check = diversity_check(collapsed, varied, references=refs, policy=cfg)
    assert check.status == "fail" and check.value == pytest.approx(0.01)
    same = diversity_check(collapsed, collapsed, references=refs, policy=cfg)
    assert same.status == "pass"  # baseline too


def test_length_bias_check_flags_gains_that_come_with_longer_answers() -> None:
    n = 60
    base_answers = ["81"] * n
    cand_answers = ["81" + " indeed" * (i % 5) for i in range(n)]
    base_scores = [0.5] * n
    cand_scores = [0.5 + 0.1 * (i % 5) for i in range(n)]  # reward rises with length
    check = length_bias_check(
        base_scores,
        cand_scores,
        baseline_answers=base_answers,
        candidate_answers=cand_answers,
        policy=ReleaseSettings(),
    )
    assert check.status == "fail" and check.value is not None and check.value > 0.9
    same = length_bias_check(
        base_scores,
        base_scores,
        baseline_answers=base_answers,
        candidate_answers=base_answers,
        policy=ReleaseSettings(),
    )
    assert same.status == "pass" and same.value is None


class FakeSource:
    """Answers golden items right with a given probability (by item, deterministic)."""

    lm = None

    def __init__(self, version: str, accuracy: float, seed: int = 0) -> None:
        self.version, self.accuracy, self.seed = version, accuracy, seed

    def answer(self, requests: Sequence[list[dict]], *, max_tokens: int) -> list[Answer]:
        out = []
        for i, messages in enumerate(requests):
            right = messages[-1]["content"].rsplit("=", 1)[1].strip()
            ok = random.Random(f"{self.seed}-{i}").random() < self.accuracy
            out.append(Answer(right if ok else str(int(right) + 1), 0.01))
        return out


@pytest.fixture
def scorer(tmp_path: Path):
    from infra.settings import Settings
    from tasks.reward import Scorer

    return Scorer(Settings(home=tmp_path))


def test_run_gate_with_the_stage2_reward_and_consistent_eval_rows(scorer) -> None:
    items = load_golden()[:120]
    base = FakeSource("v0", 0.5, seed=0)
    better = FakeSource("v1", 0.9, seed=0)  # same seed: right wherever v0 is right, and more
    result = run_gate(
        GateInputs(items=items, baseline=base, candidate=better, scorer=scorer, policy=CONFIG)
    )
    assert result.decision == Decision.PROCEED and result.test.p_value < 0.05
    assert {c.name: c.status for c in result.checks} == {
        "kl": "skipped",
        "diversity": "pass",
        "length_bias": "pass",
        "golden_verifier": "pass",
    }
    rows = result.eval_rows()
    assert len(rows) == 2 * len(items) and {r["run_id"] for r in rows} == {result.run_id}
    cand = [r["score"] for r in rows if r["model_version"] == "v1"]
    assert sum(cand) / len(cand) == pytest.approx(result.test.mean_candidate)
    wrong = [r for r in rows if r["model_version"] == "v0" and r["score"] < 0.5]
    assert wrong, "a wrong answer must score low under the reward"


def test_report_shows_the_decision_and_its_numbers(scorer) -> None:
    items = load_golden()[:60]
    worse = run_gate(
        GateInputs(
            items=items,
            baseline=FakeSource("v0", 0.8),
            candidate=FakeSource("v2", 0.2),
            scorer=scorer,
            policy=CONFIG,
        )
    )
    assert worse.decision == Decision.ROLLBACK
    md = report_markdown(worse)
    assert "**Decision: ROLLBACK**" in md
    assert f"{worse.test.mean_candidate:.4f}" in md and "Wilcoxon" in md and "length_bias" in md
    data = json.loads(json.dumps(report_json(worse), allow_nan=False))
    assert data["decision"] == "ROLLBACK" and len(data["items"]) == 60
    assert data["test"]["mean_baseline"] == pytest.approx(worse.test.mean_baseline)
    assert report_plot(worse).startswith(b"\x89PNG")


def test_report_names_its_golden_version_and_warns_of_low_coverage(scorer) -> None:
    from tasks.golden import golden_version
    from tasks.golden_coverage import GoldenSet, gate_warning, measure

    items = load_golden()[:40]
    version = golden_version()
    result = run_gate(
        GateInputs(
            items=items,
            baseline=FakeSource("v0", 0.5),
            candidate=FakeSource("v1", 0.5),
            scorer=scorer,
            policy=CONFIG,
            golden_version=version,
        )
    )
    prompts = ["What is 12+30?", "What is 3 to the power of 4?", "What is 2 to the power of 9?"]
    coverage = measure(
        prompts,
        GoldenSet([it.question for it in items], version),
        workload="calculator",
        window="2026-11-30T10:00:00Z",
        threshold=0.6,
    )
    result.warnings.append(str(gate_warning(coverage, minimum=0.8, golden_version=version)))
    md = report_markdown(result)
    assert f"| golden set version | {version} |" in md
    assert "> **Warning:** the golden set covers only 33% of the calculator prompts" in md
    data = report_json(result)
    assert data["golden_version"] == version and data["warnings"] == result.warnings


def test_a_catastrophic_regression_on_a_small_golden_set_is_rejected() -> None:
    base = [1.0, 0.9, 1.0, 0.8, 1.0, 0.9, 1.0, 0.9, 1.0, 1.0]
    cand = [0.1, 0.0, 0.2, 0.1, 0.0, 0.1, 0.3, 0.0, 0.1, 0.2]  # every item far worse
    decision, reasons = decide(paired_test(base, cand, n_bootstrap=500), CONFIG)
    assert decision == Decision.ROLLBACK
    assert reasons[0].startswith("catastrophic regression on only 10 paired samples")


def test_a_small_noisy_drop_on_few_items_is_still_held() -> None:
    base = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    cand = [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]  # below 0.95 x, but not significant
    decision, reasons = decide(paired_test(base, cand, n_bootstrap=500), CONFIG)
    assert decision == Decision.MANUAL_REVIEW and "only 8 paired samples" in reasons[0]


def test_a_pii_leak_rejects_even_a_better_candidate() -> None:
    test = paired_test(BASE, flip(BASE, to=1.0, share=0.5, seed=4), n_bootstrap=500)
    leak = Check(
        name="pii_leak",
        status="fail",
        value=3.0,
        threshold=0.0,
        detail="3 of 200 candidate answers name identifiers ... (EMAIL_ADDRESS x3)",
        extra={},
    )
    decision, reasons = decide(test, CONFIG, checks=[leak])
    assert decision == Decision.ROLLBACK and reasons[0].startswith("pii_leak check failed")


def test_a_rejection_for_a_leak_still_names_every_other_failed_check() -> None:
    test = paired_test(BASE, flip(BASE, to=1.0, share=0.5, seed=4), n_bootstrap=500)
    leak = Check(
        name="pii_leak", status="fail", value=1.0, threshold=0.0, detail="1 of 400", extra={}
    )
    hacked = Check(
        name="golden_verifier",
        status="fail",
        value=-35.5,
        threshold=0.0,
        detail="golden verifier accuracy 51.2% -> 15.8%",
        extra={},
    )
    fine = Check(name="kl", status="pass", value=0.7, threshold=1.0, detail="KL 0.7", extra={})
    decision, reasons = decide(test, CONFIG, checks=[hacked, fine, leak])
    assert decision == Decision.ROLLBACK
    assert reasons == [
        "pii_leak check failed: 1 of 400",
        "golden_verifier check failed: golden verifier accuracy 51.2% -> 15.8%",
    ]


def test_a_candidate_held_as_not_significant_still_names_its_failed_checks() -> None:
    test = paired_test(BASE, BASE, n_bootstrap=500)  # no difference: manual review
    hacked = Check(
        name="golden_verifier",
        status="fail",
        value=-31.2,
        threshold=0.0,
        detail="golden verifier accuracy 51.2% -> 20.0%",
        extra={},
    )
    decision, reasons = decide(test, CONFIG, checks=[hacked])
    assert decision == Decision.MANUAL_REVIEW
    assert reasons[0].startswith("not significantly better")
    assert reasons[1:] == ["golden_verifier check failed: golden verifier accuracy 51.2% -> 20.0%"]
