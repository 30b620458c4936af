"""Builders shared by tests (plain functions, no fixtures)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from infra.traces import TraceRecord

if TYPE_CHECKING:
    from infra.gateway import GatewayHandle
    from tasks.release.gate.gate import GateResult


def make_trace(i: int, at: datetime, **overrides: object) -> TraceRecord:
    fields: dict[str, object] = {
        "trace_id": f"trace-{i:05d}",
        "session_id": f"s-{i % 7}",
        "user_id": f"user-{i % 11}",
        "prompt_group": f"g-{i // 3}",
        "question": f"Hi, I'm Jane Roe (jane.roe{i}@example.com). What is {i % 50}+{i % 40}?",
        "contexts": [f"calculator: {i % 50} + {i % 40} = {i % 50 + i % 40}"],
        "answer": str(i % 50 + i % 40),
        "model_version": "v0",
        "temperature": 0.7,
        "top_p": 1.0,
        "latency_s": 0.05,
        "tokens_in": 30,
        "tokens_out": 2,
        "created_at": at + timedelta(seconds=i),
    }
    fields.update(overrides)
    return TraceRecord.model_validate(fields)


def gate_result(
    version: str, base: list[float], cand: list[float], *, run_id: str = "run-1"
) -> GateResult:
    """The golden gate's result for these paired scores (default release policy, no slices)."""
    from infra.settings import ReleaseSettings
    from tasks.release.gate.gate import GateResult, paired_test
    from tasks.release.gate.superiority import decide

    test = paired_test(base, cand, n_bootstrap=200)
    decision, reasons = decide(test, ReleaseSettings())
    return GateResult(
        version=version,
        baseline="v0",
        run_id=run_id,
        decision=decision,
        reasons=reasons,
        test=test,
        slices=[],
        checks=[],
        items=[],
    )


def wait_for_background(gw: GatewayHandle) -> None:
    """Until the gateway's background calls (the shadow copies) have ended (bounded: 10 s)."""
    deadline = time.monotonic() + 10
    while gw.app.state.gateway.background and time.monotonic() < deadline:
        time.sleep(0.02)
