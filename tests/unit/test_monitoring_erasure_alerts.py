"""The erasure alerts (issue 29) under ``promtool test rules`` with the real rule file: the
deadline alert fires two days before an open erasure's deadline, the failed-replacement
alert as soon as a replacement failed, and neither once the erasure is done (gauges at 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_monitoring_alerts import check_alert, series

DAY = 86400
WEEK = 7 * DAY


def gauge(name: str, values: str) -> dict[str, str]:
    """A gauge as the Pushgateway exposes the erasure stage's push."""
    return series(name, values, job="flywheel", stage="erasure")


def erasure(age_s: float, failed: float = 0) -> list[dict[str, str]]:
    return [
        gauge("flywheel_erasure_oldest_pending_seconds", f"{age_s}x30"),
        gauge("flywheel_erasure_deadline_seconds", f"{WEEK}x30"),
        gauge("flywheel_erasure_replacement_failed", f"{failed}x30"),
    ]


CRITICAL = [{"severity": "critical"}]
CASES: dict[str, tuple[list[dict[str, str]], str, str, list[dict[str, str]]]] = {
    "open for six days: two days left at most": (
        erasure(6 * DAY),
        "ErasureDeadlineNear",
        "5m",
        CRITICAL,
    ),
    "open for a day": (erasure(DAY), "ErasureDeadlineNear", "5m", []),
    "no open erasure (gauge 0)": (erasure(0), "ErasureDeadlineNear", "5m", []),
    "a replacement failed the gate": (
        erasure(DAY, failed=1),
        "ErasureReplacementFailed",
        "5m",
        CRITICAL,
    ),
    "no failed replacement": (erasure(DAY), "ErasureReplacementFailed", "5m", []),
}


@pytest.mark.parametrize("case", list(CASES))
def test_erasure_alert(case: str, tmp_path: Path) -> None:
    check_alert(CASES[case], tmp_path)


def test_the_gauges_come_from_the_cases() -> None:
    """What the alerts read is what the code publishes: the oldest open case's age, 0 once
    every case is done, and the failed replacements."""
    from datetime import UTC, datetime, timedelta

    from tasks.governance.reach import ErasureCase, erasure_gauges

    at = datetime(2026, 11, 26, tzinfo=UTC)

    def case(days_ago: float, status: str) -> ErasureCase:
        requested = at - timedelta(days=days_ago)
        return ErasureCase(
            receipt=f"{int(days_ago * 10):064x}",
            requested_at=requested,
            deadline_at=requested + timedelta(days=7),
            status=status,  # type: ignore[arg-type]
        )

    cases = [case(6, "done"), case(3, "replacement_failed"), case(1, "pending")]
    gauges = erasure_gauges(cases, deadline_days=7, at=at)
    assert gauges["flywheel_erasure_oldest_pending_seconds"] == 3 * DAY
    assert gauges["flywheel_erasure_deadline_seconds"] == WEEK
    assert gauges["flywheel_erasure_replacement_failed"] == 1
    done = [c.model_copy(update={"status": "done"}) for c in cases]
    assert (
        erasure_gauges(done, deadline_days=7, at=at)["flywheel_erasure_oldest_pending_seconds"] == 0
    )
