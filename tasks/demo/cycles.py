"""The summary of several improvement cycles (``flywheel run --cycles N``): golden accuracy
cycle by cycle and where the loop plateaus."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

PLATEAU_GAIN = 0.01  # a cycle that adds less golden accuracy than this has plateaued


class Summary(Protocol):
    """What the report reads of :class:`tasks.demo.loop_summary.LoopSummary` (no import back
    into it)."""

    @property
    def base_version(self) -> str:
        """The version the loop started from."""

    @property
    def base_accuracy(self) -> float | None:
        """Its golden accuracy."""

    @property
    def cycles(self) -> Sequence[Any]:
        """The cycles run, in order."""


def percent(value: float | None) -> str:
    """``61.5%``, or ``n/a`` when there is no value."""
    return "n/a" if value is None else f"{value:.1%}"


def cycles_report(summary: Summary, min_gain: float = PLATEAU_GAIN) -> list[str]:
    """Golden accuracy cycle by cycle (the serving version after each) and where it plateaus:
    the first cycle whose candidate was not promoted or gained less than ``min_gain``."""
    s = summary
    lines = ["golden accuracy by cycle (the stable version after it):"]
    serving, accuracy = s.base_version, s.base_accuracy
    lines.append(f"  start    {serving:<5} {percent(accuracy)}")
    plateau: str | None = None
    for c in s.cycles:
        gain = None
        if c.candidate_accuracy is not None and c.baseline_accuracy is not None:
            gain = c.candidate_accuracy - c.baseline_accuracy
        if c.outcome == "promoted" and c.candidate:
            serving, accuracy = c.candidate, c.candidate_accuracy or accuracy
        tried = f"{c.candidate} {percent(c.candidate_accuracy)}" if c.candidate else "no candidate"
        delta = "" if gain is None else f", {100 * gain:+.1f} points"
        lines.append(
            f"  cycle {c.cycle:<2} {serving:<5} {percent(accuracy)}  "
            f"(candidate {tried}{delta}: {c.outcome})"
        )
        if plateau is None and (c.outcome != "promoted" or gain is None or gain < min_gain):
            plateau = (
                f"plateau from cycle {c.cycle}: "
                + (
                    f"its candidate gained {100 * gain:+.1f} points (< {100 * min_gain:.0f})"
                    if gain is not None and gain < min_gain
                    else f"its candidate was not promoted ({c.outcome})"
                )
                + f"; the loop stays at {percent(accuracy)} with {serving}"
            )
    lines.append(f"  {plateau or 'no plateau yet: every cycle was promoted with a gain'}")
    return lines
