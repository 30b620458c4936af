"""`flywheel run --cycles N`'s summary: golden accuracy cycle by cycle and where it plateaus."""

from __future__ import annotations

import pytest

from tasks.demo.loop_summary import CycleSummary, LoopSummary, loop_report


def cycle(n: int, base: str, cand: str, accs: tuple[float, float], outcome: str) -> CycleSummary:
    return CycleSummary(
        cycle=n,
        baseline=base,
        candidate=cand,
        baseline_accuracy=accs[0],
        candidate_accuracy=accs[1],
        outcome=outcome,
        train_status="trained",
    )


def summary(cycles: list[CycleSummary]) -> LoopSummary:
    return LoopSummary(
        base_version="v0", base_accuracy=0.495, bootstrap_cached=True, cycles=cycles, wall_s=1.0
    )


def test_three_cycles_show_accuracy_per_cycle_and_the_plateau() -> None:
    text = loop_report(
        summary(
            [
                cycle(1, "v0", "v1", (0.495, 0.665), "promoted"),
                cycle(2, "v1", "v2", (0.665, 0.72), "promoted"),
                cycle(3, "v2", "v3", (0.72, 0.715), "held"),
            ]
        )
    )
    assert "golden accuracy by cycle" in text
    assert "cycle 1  v1    66.5%" in text and "cycle 2  v2    72.0%" in text
    assert "cycle 3  v2    72.0%  (candidate v3 71.5%, -0.5 points: held)" in text
    assert "plateau from cycle 3" in text and "stays at 72.0% with v2" in text


def test_a_promoted_cycle_with_a_tiny_gain_is_the_plateau() -> None:
    text = loop_report(
        summary(
            [
                cycle(1, "v0", "v1", (0.495, 0.665), "promoted"),
                cycle(2, "v1", "v2", (0.665, 0.668), "promoted"),
            ]
        )
    )
    assert "plateau from cycle 2: its candidate gained +0.3 points (< 1)" in text


def test_one_cycle_prints_no_cycle_table() -> None:
    text = loop_report(summary([cycle(1, "v0", "v1", (0.495, 0.665), "promoted")]))
    assert "golden accuracy by cycle" not in text


def test_two_workloads_each_show_their_accuracy_gate_and_release() -> None:
    from dataclasses import replace

    from tasks.demo.loop_summary import not_promoted

    calc = replace(cycle(1, "v0", "v1", (0.5, 0.6), "promoted"), workload="calculator")
    clock = replace(cycle(1, "v0", "v2", (0.4, 0.42), "held"), workload="clock")
    calc.p_value, calc.decision, calc.baseline_reward, calc.candidate_reward = (
        0.001,
        "PROCEED_TO_SHADOW",
        0.6,
        0.7,
    )
    s = summary([calc, clock])
    s.base_accuracy_by_workload = {"calculator": 0.5, "clock": 0.4}
    text = loop_report(s)
    assert text.startswith("flywheel run: 1 cycle(s)")
    assert "by workload: calculator 50.0%, clock 40.0%" in text
    assert text.count("cycle 1:") == 1  # the shared stages once, then each workload
    assert "workload calculator (baseline v0):" in text and "workload clock (baseline v0):" in text
    assert "golden accuracy       v0 50.0% -> v1 60.0%" in text
    assert "golden accuracy       v0 40.0% -> v2 42.0%" in text
    assert "p = 0.001 (PROCEED_TO_SHADOW)" in text
    assert not_promoted(s) == "cycle 1 (workload clock): candidate v2 was not promoted: held"


def test_the_demo_registers_each_workloads_verifier_only_when_it_runs_several(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    from infra.settings import get_settings
    from tasks.demo.loop import demo_verifiers

    get_settings.cache_clear()
    both = json.loads(demo_verifiers("local")["FLYWHEEL_REWARD__VERIFIERS"])
    assert both == {
        "calculator": "tasks.demo.verifier:calculator",
        "clock": "tasks.demo.verifier:clock",
    }
    assert demo_verifiers("vllm") == {}  # the Llama profile learns the calculator alone
    monkeypatch.setenv("FLYWHEEL_WORKLOADS", '["calculator"]')
    get_settings.cache_clear()
    assert demo_verifiers("local") == {}
    get_settings.cache_clear()


def test_a_cycle_counts_its_windows_its_training_and_its_release() -> None:
    from tasks.collect import CollectResult
    from tasks.curate.summary import CurateResult
    from tasks.release.machine.outcome import ReleaseOutcome
    from tasks.train.run import TrainRunResult

    shared = CycleSummary(cycle=1, baseline="v0")
    for n in (3, 5):
        collected = CollectResult(
            window=f"w{n}", read=n, written=n, quarantined=1, opted_out=0, duplicates=0, key="k"
        )
        curated = CurateResult(
            window=f"w{n}",
            read=n,
            written=n - 1,
            train=n - 1,
            rejected_only=0,
            k_withheld=0,
            released=0,
            quarantined=2,
            dropped={},
            pii_entities={"PERSON": n, "EMAIL_ADDRESS": 1},
            snapshot_id=None,
        )
        shared.add_window(collected, curated)
    assert (shared.traces, shared.quarantined, shared.pii_entities, shared.examples) == (
        8,
        6,
        10,
        6,
    )

    shared.add_training(
        TrainRunResult(
            status="trained",
            message="trained v1",
            train_run="r",
            base_version="v0",
            method="dpo",
            pairs=12,
            version="v1",
            golden_accuracy_base=0.5,
            golden_accuracy=0.6,
        )
    )
    gate = {"decision": "pass", "p_value": 0.01, "mean_baseline": 0.4, "mean_candidate": 0.7}
    shared.add_release(
        ReleaseOutcome(version="v1", outcome="promoted", reasons=["canary passed"], gate=gate)
    )
    assert (shared.train_status, shared.pairs, shared.candidate) == ("trained v1", 12, "v1")
    assert (shared.baseline_accuracy, shared.candidate_accuracy) == (0.5, 0.6)
    assert (shared.decision, shared.p_value) == ("pass", 0.01)
    assert (shared.baseline_reward, shared.candidate_reward) == (0.4, 0.7)
    assert (shared.outcome, shared.reasons) == ("promoted", ["canary passed"])
