"""The golden set's coverage of a window's prompts (tasks/golden_coverage.py): which anonymised
prompts a golden question covers, the uncovered clusters with a k-anonymous example each, the
stored measure (trace ids, never text) and the gate report's warning."""

from __future__ import annotations

import json
from pathlib import Path

from infra.settings import CurateSettings, RewardSettings
from infra.store import LocalStore
from tasks import golden_coverage
from tasks.golden import GOLDEN_DIR, golden_version, load_golden

GOLDEN = [it.question for it in load_golden(GOLDEN_DIR)]
# what curate hands over: the user's message after anonymisation, preambles and all
OLD_KIND = [
    "What is 23+58?",
    "Hi, I'm <PERSON> (<EMAIL_ADDRESS>). What is 41 + 17?",
    "Compute 12 plus 77.",
    "<PERSON> here. What's the sum of 30 and 45?",
    "My account is <BANK_ACCOUNT> and my phone is <PHONE_NUMBER>. 64 + 21 = ?",
]
NEW_KIND = [
    "What is 3 to the power of 4?",
    "Hi, I'm <PERSON>, card <CREDIT_CARD>. What is 2 to the power of 10?",
    "What is 5 to the power of 3?",
    "What is 7 to the power of 2?",
]
CLOCK = ["What time is it 45 minutes after 10:30?", "What time is it 20 minutes after 09:50?"]


def measure(prompts: list[str], **kw) -> golden_coverage.Coverage:
    return golden_coverage.measure(
        prompts,
        golden_coverage.GoldenSet(GOLDEN, "gTEST"),
        workload="calculator",
        window="2026-11-30T10:00:00Z",
        threshold=0.6,
        **kw,
    )


def test_every_phrasing_of_a_golden_template_is_covered_preambles_and_all() -> None:
    cov = measure(OLD_KIND)
    assert (cov.prompts, cov.covered, cov.clusters) == (5, 5, [])
    assert cov.share == 1.0


def test_a_new_kind_of_question_is_uncovered_and_clustered_apart() -> None:
    cov = measure(OLD_KIND + NEW_KIND + CLOCK)
    assert cov.covered == 5 and cov.uncovered_share == 6 / 11
    sizes = sorted(((c.size, tuple(c.terms[:3])) for c in cov.clusters), reverse=True)
    assert [s for s, _ in sizes] == [4, 2]  # exponentiation, then the clock's questions
    power = cov.clusters[0]
    assert "power" in power.terms and power.share == 4 / 11
    assert power.example in NEW_KIND and power.nearest_golden < 0.6


def test_only_a_released_prompt_is_shown_and_the_stored_measure_holds_no_text(
    tmp_path: Path,
) -> None:
    prompts = OLD_KIND + NEW_KIND
    held = {NEW_KIND[0], NEW_KIND[1]}  # fewer than k users asked these yet
    cov = measure(
        prompts,
        released=[p not in held for p in prompts],
        ids=[f"t{i}" for i in range(len(prompts))],
    )
    (power,) = cov.clusters
    assert power.example == NEW_KIND[2] and power.example_trace == "t7"
    store = LocalStore(tmp_path)
    key = golden_coverage.save(store, cov)
    assert key == "curate/coverage/calculator.json"
    stored = store.get(key).decode()
    assert "power" not in stored and "t7" in stored  # neither text nor tokens
    again = golden_coverage.latest(store, "calculator")
    assert again is not None and again.share == cov.share and again.clusters[0].example is None
    assert golden_coverage.latest(store, "clock") is None
    all_held = measure(NEW_KIND, released=[False] * 4)
    assert all_held.clusters[0].example is None


def test_the_gate_warns_below_the_minimum_and_names_another_version() -> None:
    low = measure(OLD_KIND + NEW_KIND)
    assert golden_coverage.gate_warning(low, minimum=0.8, golden_version="gTEST") == (
        "the golden set covers only 56% of the calculator prompts of window "
        "2026-11-30T10:00:00Z (below 80%): this decision may not predict what users get; "
        "refresh it with flywheel golden propose --workload calculator"
    )
    other = golden_coverage.gate_warning(low, minimum=0.8, golden_version="gNEW")
    assert other is not None and "measured against golden set gTEST, not gNEW" in other
    assert golden_coverage.gate_warning(measure(OLD_KIND), minimum=0.8, golden_version="g") is None
    assert golden_coverage.gate_warning(None, minimum=0.8, golden_version="g") is None


def test_measure_window_splits_by_workload_against_each_own_set(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    examples = [
        {"trace_id": f"c{i}", "workload": "calculator", "question": q}
        for i, q in enumerate(OLD_KIND + NEW_KIND)
    ] + [{"trace_id": f"k{i}", "workload": "clock", "question": q} for i, q in enumerate(CLOCK)]
    measured = golden_coverage.measure_window(
        store,
        RewardSettings(),
        CurateSettings(),
        window="2026-11-30T10:00:00Z",
        examples=examples,
        released={e["trace_id"] for e in examples},
        workloads=["calculator", "clock"],
    )
    by = {c.workload: c for c in measured}
    assert by["calculator"].covered == 5 and by["calculator"].golden_version == golden_version(
        GOLDEN_DIR
    )
    assert by["clock"].share == 1.0  # against the clock's own golden set
    assert by["clock"].golden_version == golden_version(GOLDEN_DIR / "clock")
    assert json.loads(store.get("curate/coverage/clock.json"))["prompts"] == 2
