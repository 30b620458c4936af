"""What ``flywheel run --distil`` prints after its cycles (:func:`distil_lines`): per workload,
the student distilled from the new stable version, both golden accuracies, the
non-inferiority verdict with its margin and p-value, and the serving cost per 1,000 requests
of teacher and student as the gateway measured it while both served the release's traffic."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import TYPE_CHECKING, Any

from tasks.demo.cycles import percent

if TYPE_CHECKING:
    from infra.metrics.cost import CostReader, CostStats
    from infra.metrics.cost_readers import EmbeddedCost
    from tasks.distil.run import DistilResult
    from tasks.release.machine.outcome import ReleaseOutcome


@dataclass(kw_only=True)
class DistilSummary:
    """One workload's student: how it was distilled, gated, released, and what it costs."""

    workload: str | None
    teacher: str
    status: str
    message: str
    student: str | None = None
    student_profile: str = ""
    examples: int = 0
    teacher_accuracy: float | None = None
    student_accuracy: float | None = None
    teacher_parameters: int | None = None
    student_parameters: int | None = None
    decision: str | None = None
    margin: float | None = None
    p_value: float | None = None
    mean_diff: float | None = None
    ci: list[float] | None = None
    outcome: str = "not released"
    reasons: list[str] = dataclass_field(default_factory=list)
    teacher_cost: dict[str, Any] | None = None  # CostStats.as_dict over the release
    student_cost: dict[str, Any] | None = None
    gate_cost_ratio: float | None = None  # student's compute per golden answer / teacher's

    @classmethod
    def of(cls, result: DistilResult) -> DistilSummary:
        """The summary of a distil run (not released yet)."""
        return cls(
            workload=result.workload,
            teacher=result.teacher,
            status=result.status,
            message=result.message,
            student=result.version,
            student_profile=result.student_profile,
            examples=result.examples,
            teacher_accuracy=result.teacher_accuracy,
            student_accuracy=result.student_accuracy,
            teacher_parameters=result.teacher_parameters,
            student_parameters=result.student_parameters,
        )

    def add_release(
        self, released: ReleaseOutcome, *, teacher: CostStats | None, student: CostStats | None
    ) -> None:
        """Take the release's non-inferiority test, outcome, and both measured costs."""
        gate = released.gate or {}
        ni = gate.get("noninferiority") or {}
        test = ni.get("test") or {}
        self.gate_cost_ratio = (ni.get("cost") or {}).get("ratio")
        self.decision = gate.get("decision")
        self.margin, self.p_value = test.get("margin"), test.get("p_value")
        self.mean_diff = test.get("mean_diff")
        if "ci_low" in test:
            self.ci = [test["ci_low"], test["ci_high"]]
        self.outcome, self.reasons = released.outcome, released.reasons
        self.teacher_cost = teacher.as_dict() if teacher else None
        self.student_cost = student.as_dict() if student else None

    @property
    def cost_ratio(self) -> float | None:
        """Student's measured compute per request over the teacher's (None: not measured)."""
        t, s = (_per_request(c) for c in (self.teacher_cost, self.student_cost))
        return s / t if t and s is not None else None

    @property
    def matched_cost_ratio(self) -> float | None:
        """The same at equal batch sizes (:func:`infra.metrics.cost.matched_compute_ratio`): what
        the student's smaller share of the traffic does not skew (None: not measured)."""
        from infra.metrics.cost import CostStats, matched_compute_ratio

        if not self.teacher_cost or not self.student_cost:
            return None
        t, s = (
            CostStats(by_batch={b: (n, c) for b, (n, c) in (cost.get("by_batch") or {}).items()})
            for cost in (self.teacher_cost, self.student_cost)
        )
        matched = matched_compute_ratio(s, t)
        return matched.ratio if matched is not None else None


def _per_request(cost: dict[str, Any] | None) -> float | None:
    if not cost or not cost.get("requests"):
        return None
    return float(cost["compute_s"]) / float(cost["requests"])


def cost_meter(gateway_url: str) -> tuple[EmbeddedCost, float]:
    """A reader of the gateway's cost counters (its admin listener's ``/admin/metrics``: the
    public ``/metrics`` names no route), and the mark its window starts at (now)."""
    from infra.metrics.cost_readers import EmbeddedCost
    from infra.metrics.promql_embedded import EmbeddedMetrics
    from infra.settings import get_settings

    admin_url, token = get_settings().gateway.metrics_source(gateway_url)
    meter = EmbeddedCost(EmbeddedMetrics.from_url(admin_url or gateway_url, token=token).scrape)
    return meter, meter.mark()


def read_costs(
    reader: CostReader | None, *, teacher: str, student: str, since: float, workload: str | None
) -> tuple[CostStats | None, CostStats | None]:
    """Both versions' cost since ``since`` as the gateway counted it (Nones: no reader)."""
    if reader is None:
        return None, None
    return (
        reader.read_cost(teacher, since=since, workload=workload),
        reader.read_cost(student, since=since, workload=workload),
    )


def _cost(cost: dict[str, Any] | None) -> str:
    k = (cost or {}).get("per_1k_requests") or {}
    if k.get("compute_s") is None:
        return "not measured"
    return f"{k['compute_s']:.2f} s compute, {k['tokens']:,.0f} tokens"


def distil_lines(summaries: list[DistilSummary]) -> list[str]:
    """The ``distil`` part of the loop's report."""
    lines = ["distil (a smaller student of each workload's stable version):"] if summaries else []
    for d in summaries:
        pad = "    " if d.workload else "  "
        lines += [f"  workload {d.workload}:"] if d.workload else []
        if not d.student:
            lines.append(f"{pad}student               none ({d.message})")
            continue
        size = ""
        if d.student_parameters and d.teacher_parameters:
            size = f", {d.student_parameters / d.teacher_parameters:.0%} of its parameters"
        lines += [
            f"{pad}student               {d.student} ({d.student_profile}{size}) "
            f"from {d.examples} accepted answers",
            f"{pad}golden accuracy       teacher {d.teacher} {percent(d.teacher_accuracy)}, "
            f"student {percent(d.student_accuracy)}",
        ]
        if d.p_value is not None and d.mean_diff is not None:
            ci = f", CI [{d.ci[0]:+.1f}, {d.ci[1]:+.1f}]" if d.ci else ""
            lines.append(
                f"{pad}non-inferiority       {d.mean_diff:+.1f} points{ci}, margin "
                f"{d.margin:g}, one-sided p = {d.p_value:.2g} ({d.decision})"
            )
        ratio, matched = d.cost_ratio, d.matched_cost_ratio
        at = f", {matched:.2f}x at the same batch sizes" if matched is not None else ""
        if d.gate_cost_ratio is not None:
            lines.append(
                f"{pad}cost at the gate      student {d.gate_cost_ratio:.2f}x the teacher's "
                "compute per golden answer"
            )
        lines += [
            f"{pad}cost per 1k requests  teacher {_cost(d.teacher_cost)}; "
            f"student {_cost(d.student_cost)}"
            + (f" ({ratio:.2f}x the teacher's compute{at})" if ratio else ""),
            f"{pad}release               {d.outcome}"
            + (f" ({'; '.join(d.reasons)})" if d.reasons else ""),
        ]
    return lines
