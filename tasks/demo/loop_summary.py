"""The summary ``flywheel run`` prints (:func:`loop_report`) and its verdict
(:func:`not_promoted`): each cycle's shared stage counts, then each workload's candidate, gate
and release."""

from __future__ import annotations

from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from typing import TYPE_CHECKING

from tasks.demo.cycles import cycles_report, percent
from tasks.demo.distil_summary import DistilSummary, distil_lines

if TYPE_CHECKING:
    from tasks.collect import CollectResult
    from tasks.curate.summary import CurateResult
    from tasks.release.machine.outcome import ReleaseOutcome
    from tasks.train.run import TrainRunResult


@dataclass(kw_only=True)
class CycleSummary:
    """One cycle of flywheel run for one workload (one entry per workload when the demo runs
    several): the cycle's shared stage counts, the workload's candidate, its release."""

    cycle: int
    baseline: str
    workload: str | None = None  # the workload released (None: the shared release)
    traces: int = 0
    quarantined: int = 0
    pii_entities: int = 0
    examples: int = 0
    pairs: int = 0
    train_status: str = ""
    candidate: str | None = None
    baseline_accuracy: float | None = None
    candidate_accuracy: float | None = None
    baseline_reward: float | None = None
    candidate_reward: float | None = None
    p_value: float | None = None
    decision: str | None = None
    outcome: str = "not released"
    reasons: list[str] = dataclass_field(default_factory=list)

    def add_window(self, collected: CollectResult, curated: CurateResult) -> None:
        """Count one hourly window's collect and curate runs into the cycle's shared counts."""
        self.traces += collected.written
        self.quarantined += collected.quarantined + curated.quarantined
        self.pii_entities += sum(curated.pii_entities.values())
        self.examples += curated.written

    def add_training(self, trained: TrainRunResult) -> None:
        """Take the train run's status, pairs, candidate and golden accuracies."""
        self.train_status, self.pairs = trained.message, trained.pairs
        self.candidate = trained.version
        self.baseline_accuracy = trained.golden_accuracy_base
        self.candidate_accuracy = trained.golden_accuracy

    def add_release(self, released: ReleaseOutcome) -> None:
        """Take the release's gate numbers (decision, p-value, mean rewards) and outcome."""
        gate = released.gate or {}
        self.decision = gate.get("decision")
        self.p_value = gate.get("p_value")
        self.baseline_reward = gate.get("mean_baseline")
        self.candidate_reward = gate.get("mean_candidate")
        self.outcome, self.reasons = released.outcome, released.reasons


@dataclass(kw_only=True)
class LoopSummary:
    """What flywheel run did: the base model, each cycle, the wall time."""

    base_version: str
    base_accuracy: float
    bootstrap_cached: bool
    cycles: list[CycleSummary]
    wall_s: float
    base_accuracy_by_workload: dict[str, float] = dataclass_field(default_factory=dict)
    distilled: list[DistilSummary] = dataclass_field(default_factory=list)  # run --distil


def loop_report(summary: LoopSummary) -> str:
    """The short human summary ``flywheel run`` prints."""
    s = summary
    lines = [
        f"flywheel run: {len({c.cycle for c in s.cycles})} cycle(s) in {s.wall_s:.0f} s; base model "
        f"{s.base_version} ({'cached' if s.bootstrap_cached else 'bootstrapped'}, golden "
        f"accuracy {percent(s.base_accuracy)})"
    ]
    if s.base_accuracy_by_workload:
        lines[0] += " by workload: " + ", ".join(
            f"{w} {percent(a)}" for w, a in s.base_accuracy_by_workload.items()
        )
    shown: set[int] = set()
    for c in s.cycles:
        if c.cycle not in shown:
            shown.add(c.cycle)
            lines += [
                f"cycle {c.cycle}" + ("" if c.workload else f" (baseline {c.baseline})") + ":",
                f"  traces collected      {c.traces} ({c.quarantined} quarantined)",
                f"  PII entities removed  {c.pii_entities}; training examples {c.examples}",
            ]
        lines += _release_lines(c)
    if len(shown) > 1:
        for w in dict.fromkeys(c.workload for c in s.cycles):
            base = s.base_accuracy_by_workload.get(w or "", s.base_accuracy)
            mine = [c for c in s.cycles if c.workload == w]
            lines += [f"workload {w}:"] if w else []
            lines += cycles_report(replace(s, base_accuracy=base, cycles=mine))
    return "\n".join(lines + distil_lines(s.distilled))


def _release_lines(c: CycleSummary) -> list[str]:
    """One workload's part of a cycle: its pairs, candidate, gate and release."""
    lines = [f"  workload {c.workload} (baseline {c.baseline}):"] if c.workload else []
    pad = "  " if c.workload else ""
    lines.append(f"  {pad}preference pairs      {c.pairs}  [{c.train_status}]")
    if c.candidate:
        lines.append(
            f"  {pad}golden accuracy       {c.baseline} {percent(c.baseline_accuracy)} -> "
            f"{c.candidate} {percent(c.candidate_accuracy)}"
        )
    if c.p_value is not None:
        lines.append(
            f"  {pad}golden reward         {c.baseline_reward:.3f} -> "
            f"{c.candidate_reward:.3f}, paired t-test p = {c.p_value:.2g} ({c.decision})"
        )
    reasons = f" ({'; '.join(c.reasons)})" if c.reasons else ""
    lines.append(f"  {pad}release               {c.outcome}{reasons}")
    return lines


def not_promoted(summary: LoopSummary) -> str | None:
    """Why the loop did not work, or ``None`` (``flywheel run`` then exits 0): every cycle must
    train a candidate and the first must promote it (``--cycles 0``: none ran); with
    ``--distil`` a student must be promoted for at least one workload. A later candidate held or rolled back is
    the release doing its job at the plateau the cycles report shows, not a failure."""
    for c in summary.cycles:
        if not c.candidate:
            return f"cycle {c.cycle}{_of(c)}: no candidate to release ({c.train_status})"
    if not summary.cycles and not summary.distilled:
        return "no cycle ran"
    for first in [c for c in summary.cycles if c.cycle == summary.cycles[0].cycle]:
        if first.outcome != "promoted":
            why = f" ({'; '.join(first.reasons)})" if first.reasons else ""
            return (
                f"cycle {first.cycle}{_of(first)}: candidate {first.candidate} was not "
                f"promoted: {first.outcome}{why}"
            )
    if summary.distilled and not any(d.outcome == "promoted" for d in summary.distilled):
        why = "; ".join(f"{d.student or 'no student'}: {d.outcome}" for d in summary.distilled)
        return f"--distil: no student was promoted ({why})"
    return None


def _of(c: CycleSummary) -> str:
    return f" (workload {c.workload})" if c.workload else ""
