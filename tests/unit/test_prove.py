"""flywheel prove's logic without training: the control's pairs, the oracle's labels, the
intervals and the paired test, the report (numbers a reader sees), the CLI's refusals."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from infra.settings import RewardSettings
from tasks.demo import domain
from tasks.prove.arms import ARMS, ArmRun, oracle_rows, shuffled_pairs
from tasks.prove.report import text_table, write_report
from tasks.prove.run import Ablation, loop_vs_control, summarize
from tasks.prove.stats import compare, seed_interval
from tasks.train.pairs import Selection, demo_render


def pair(i: int) -> dict[str, Any]:
    return {
        "prompt": f"p{i}",
        "chosen": " right",
        "rejected": " wrong",
        "chosen_reward": 1.0,
        "rejected_reward": 0.0,
    }


def test_shuffled_pairs_swap_about_half_and_keep_everything_else() -> None:
    pairs = [pair(i) for i in range(400)]
    out = shuffled_pairs(pairs, seed=1)
    swapped = [p for p in out if p["chosen"] == " wrong"]
    assert len(out) == 400 and [p["prompt"] for p in out] == [p["prompt"] for p in pairs]
    assert 150 < len(swapped) < 250
    assert all(p["chosen_reward"] == 0.0 and p["rejected"] == " right" for p in swapped)
    assert shuffled_pairs(pairs, seed=1) == out and shuffled_pairs(pairs, seed=2) != out
    assert pairs[0]["chosen"] == " right"  # the loop's pairs are not changed in place


def test_oracle_rows_answer_every_prompt_with_the_true_sum() -> None:
    a, b = domain.training_pairs()[0]
    question = f"What is {a}+{b}?"
    prompt = demo_render(question)
    sel = Selection(
        pairs=[],
        sft=[],
        prompts=[{"prompt": prompt, "question": question, "contexts": [], "trace_id": "t"}],
        snapshot_id=None,
        windows=[],
    )
    assert oracle_rows(sel, reward=RewardSettings()) == [
        {"prompt": prompt, "completion": f" {a + b}"}
    ]


def test_seed_interval_is_a_t_interval_over_seeds_and_wilson_for_one() -> None:
    iv = seed_interval([0.6, 0.7, 0.8], items=400)
    assert iv.mean == pytest.approx(0.7)
    assert iv.low == pytest.approx(0.7 - 4.3027 * 0.1 / math.sqrt(3), abs=1e-3)
    assert iv.method == "t over seeds"
    one = seed_interval([0.5], items=400)
    assert one.method == "Wilson over items" and 0.45 < one.low < 0.5 < one.high < 0.55


def test_compare_pairs_items_and_reports_the_seed_test_beside_it() -> None:
    n = 200
    better = [[1.0] * 150 + [0.0] * 50, [1.0] * 140 + [0.0] * 60]
    worse = [[1.0] * 100 + [0.0] * 100, [0.0] * 10 + [1.0] * 90 + [0.0] * 100]
    c = compare("loop", "shuffled", a_runs=better, b_runs=worse)
    assert c.items == n and c.seeds == 2
    assert c.mean_diff == pytest.approx((145 - 95) / n)
    assert c.t_p < 1e-6 and c.ci_low > 0 and c.wins > c.losses
    same = compare("loop", "shuffled", a_runs=worse, b_runs=worse)
    assert same.mean_diff == 0 and same.t_p == 1.0 and same.wilcoxon_p == 1.0


def run(arm: str, seed: int, right: int) -> ArmRun:
    return ArmRun(
        arm=arm,
        seed=seed,
        accuracy=right / 100,
        scores=[1.0] * right + [0.0] * (100 - right),
        decision="PROCEED_TO_SHADOW" if right > 50 else "ROLLBACK",
        reasons=[],
        checks={"diversity": "pass"},
        train_items=10,
        steps=5,
        train_s=1.0,
        eval_s=1.0,
        mean_answer_chars=2.0,
    )


def ablation(runs: list[ArmRun]) -> Ablation:
    arms = ["loop", "shuffled", "dpo_plain"]
    return Ablation(
        base_version="v0",
        base_accuracy=0.5,
        golden_items=100,
        seeds=[0, 1, 2],
        budget={"max_steps": 5, "batch_size": 4, "learning_rate": 5e-5, "beta": 0.1},
        traffic={
            "prompts": 20,
            "temperatures": [0.7, 1.3],
            "answers": 40,
            "mean_reward": 0.5,
            "correct_share": 0.5,
            "pairs": 10,
            "singles": 12,
            "prompt_groups": 20,
        },
        arms=summarize(runs, arms=arms, base_accuracy=0.5, items=100),
        runs=runs,
        comparison=loop_vs_control(runs),
        workers=2,
        wall_s=12.0,
        load={"cpus": 2, "loadavg": [1.0, 1.0, 1.0]},
    )


def test_report_shows_each_arm_with_its_interval_the_verdict_and_the_chart(
    tmp_path: Path,
) -> None:
    runs = [run("loop", s, r) for s, r in enumerate((70, 72, 68))]
    runs += [run("shuffled", s, r) for s, r in enumerate((50, 49, 52))]
    runs += [run("dpo_plain", s, r) for s, r in enumerate((30, 35, 40))]
    ab = ablation(runs)
    table = text_table(ab)
    assert "loop beats the shuffled-reward control: +19.7 points" in table
    assert "70.0%" in table and "[" in table
    plain = next(a for a in ab.arms if a.arm == "dpo_plain")
    assert plain.regressed and "(regressed)" in table
    files = write_report(ab, tmp_path / "prove")
    md = files["report"].read_text()
    assert "![golden accuracy per arm](chart.png)" in md and "paired on the 100 golden items" in md
    assert files["chart"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert '"regressed": true' in files["json"].read_text()


def test_a_loop_no_better_than_its_control_is_said_so() -> None:
    runs = [run("loop", s, 50) for s in range(3)] + [run("shuffled", s, 50) for s in range(3)]
    assert "loop does NOT beat the shuffled-reward control" in text_table(ablation(runs))


def test_every_arm_is_listed_with_its_method() -> None:
    assert set(ARMS) == {"loop", "shuffled", "rft", "grpo", "dpo_plain", "oracle_sft"}
    assert ARMS["dpo_plain"].sft_weight == 0.0 and ARMS["loop"].sft_weight == 1.0


def test_auto_never_picks_a_method_that_regressed_in_the_ablation(tmp_path: Path) -> None:
    from tasks.prove.report import ablation_json
    from tasks.train.evidence import regressed_methods
    from tasks.train.methods import choose_method

    runs = [run("loop", s, r) for s, r in enumerate((70, 72, 68))]
    runs += [run("shuffled", s, r) for s, r in enumerate((50, 49, 52))]
    runs += [run("dpo_plain", s, r) for s, r in enumerate((30, 35, 40))]
    path = tmp_path / "ablation.json"
    import json

    path.write_text(json.dumps(ablation_json(ablation(runs)), default=str))
    # the ablation measured 10 pairs; plain DPO is what dpo means with no SFT term
    plain = regressed_methods(path, pairs=12, sft_weight=0.0)
    assert set(plain) == {"dpo"} and "dpo_plain regressed" in plain["dpo"]
    choice = choose_method("auto", pairs=12, singles=60, prompts=80, min_pairs=5, regressed=plain)
    assert choice.method == "rft" and "not dpo: dpo_plain regressed" in choice.reason
    # with the SFT term dpo is the loop arm, which did not regress
    assert regressed_methods(path, pairs=12, sft_weight=1.0) == {}
    # evidence from another data size does not apply; a missing file is no evidence
    assert regressed_methods(path, pairs=100, sft_weight=0.0) == {}
    assert regressed_methods(tmp_path / "none.json", pairs=12, sft_weight=0.0) == {}
    assert choose_method("auto", pairs=12, singles=60, prompts=80, min_pairs=5).method == "dpo"


@pytest.mark.parametrize(
    ("arms", "says"),
    [
        ("loop,shuffled,nope", "--arms: unknown nope"),
        ("loop,rft", "--arms must include loop and shuffled"),
    ],
)
def test_prove_refuses_bad_arms_in_one_line_before_anything_runs(
    arms: str, says: str, tmp_path: Path
) -> None:
    from tests.unit.test_cli_input import flywheel, one_error_line

    done = flywheel("prove", "--arms", arms, home=tmp_path)
    assert done.returncode == 2
    assert says in one_error_line(done, "flywheel prove: error: ")
    assert not (tmp_path / "fw" / "prove").exists()  # nothing trained, no report


def test_one_seed_reports_with_wilson_intervals_even_at_0_and_100_percent(
    tmp_path: Path,
) -> None:
    runs = [run("loop", 0, 100), run("shuffled", 0, 50), run("dpo_plain", 0, 0)]
    ab = ablation(runs)
    assert {a.interval.method for a in ab.arms} == {"Wilson over items"}
    files = write_report(ab, tmp_path / "prove")  # `flywheel prove --seeds 1` stopped here
    assert files["chart"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "loop" in files["report"].read_text()
