"""`flywheel run --distil` end to end, with Python networking limited to loopback: one cycle
on the demo's two workloads, then each workload's new stable version is distilled into its
``demo-small`` student (about a fifth of the teacher's parameters) and released with the
non-inferiority gate, shadow and canary while simulated users keep coming. At least one
student must be promoted, shown no worse than its teacher by more than the default margin (2
points) on its golden set and at most half its teacher's compute per request as the gateway
metered both while they served the same traffic."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from infra.routing import load_state
from infra.settings import get_settings
from infra.store import open_store

# Opt-in: a whole cycle plus two distillations and releases, measured at 1,402 s of wall time
# (2,000 requests, 500 steps) on a loaded two-core machine, far over CI's budget; and at 500
# steps neither student was promoted (calculator held: 81.5 % -> 79.2 %, not shown within 2
# points; clock rolled back: 43.5 % -> 28.0 %). FLYWHEEL_TEST_DISTIL_E2E=1 runs it.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("FLYWHEEL_TEST_DISTIL_E2E"),
        reason="opt-in (FLYWHEEL_TEST_DISTIL_E2E=1): ~25 minutes of CPU",
    ),
]

REQUESTS = 3200  # the loop's default traffic: more accepted answers per workload
STEPS = 1000  # optimizer steps per student


def test_run_distil_promotes_a_student_no_worse_and_at_least_twice_as_cheap(
    prefect_api: None,
    flywheel_home: Any,
    shared_bootstrap: Any,
    no_network: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.loop import LoopOptions, run_loop
    from tasks.demo.loop_summary import loop_report, not_promoted
    from tasks.train.lineage import read_lineage

    # beside other test workers on two cores a burst of theirs reads as a slower candidate
    # (tests/e2e/test_loop.py); the p99 rail only catches a candidate five times slower here
    monkeypatch.setenv("FLYWHEEL_RELEASE__LATENCY_P99_RATIO_MAX", "5")
    get_settings.cache_clear()
    started = time.perf_counter()
    summary = run_loop(LoopOptions(seed=0, requests=REQUESTS, distil=True, distil_steps=STEPS))
    print(loop_report(summary), f"\n(wall {time.perf_counter() - started:.0f} s)")

    assert {d.workload for d in summary.distilled} == {"calculator", "clock"}
    promoted = [d for d in summary.distilled if d.outcome == "promoted"]
    assert promoted, [(d.workload, d.outcome, d.reasons) for d in summary.distilled]
    assert not_promoted(summary) is None
    store = open_store(get_settings())
    state = load_state(store)
    for d in promoted:
        assert d.margin == 2.0 and d.ci is not None and d.ci[0] > -d.margin, d.workload
        assert d.p_value is not None and d.p_value < 0.05, d.workload
        assert d.student_parameters and d.teacher_parameters
        assert d.student_parameters <= d.teacher_parameters / 4
        assert d.cost_ratio is not None and d.cost_ratio <= 0.5, (d.workload, d.cost_ratio)
        assert state.release_of(d.workload).stable == d.student
        lineage = read_lineage(store, str(d.student))
        assert lineage.method == "distil" and lineage.base_version == d.teacher
        assert lineage.data.user_keys  # erasure reaches the student like any version
