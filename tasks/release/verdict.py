"""What the release gate decides, and on what (:class:`Scored`), shared by the golden gate
(:mod:`tasks.release.gate.gate`) and the non-inferiority gate of a cheaper model
(:mod:`tasks.release.gate.noninferiority`); and what each canary guard rail judges
(:class:`Judged`, :mod:`tasks.release.canary.rails`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.serving.answers import Answer
    from tasks.golden import GoldenItem
    from tasks.release.stats import PairedTest


class Decision(StrEnum):
    """The gate's three outcomes."""

    PROCEED = "PROCEED_TO_SHADOW"
    MANUAL_REVIEW = "MANUAL_REVIEW"
    ROLLBACK = "ROLLBACK"


@dataclass(kw_only=True)
class SliceResult:
    """One golden slice: its size, both means and whether it regressed."""

    name: str
    n: int
    mean_baseline: float
    mean_candidate: float
    diff: float
    regressed: bool


@dataclass(frozen=True)
class Scored:
    """Both versions' answers to the golden items, their rewards and the paired test."""

    items: Sequence[GoldenItem]
    base: Sequence[Answer]
    cand: Sequence[Answer]
    rewards: tuple[Sequence[float], Sequence[float]]
    test: PairedTest
    slices: list[SliceResult]


@dataclass(frozen=True, kw_only=True)
class Judged:
    """A guard rail's verdict: its report line, whether it failed, its evidence."""

    line: str
    failed: bool
    evidence: dict[str, Any]
