"""The canary check of a curate run: after anonymisation, before the commit, every planted
value (:mod:`tasks.curate.canaries`) must be gone from its anonymised record; the canaries
then leave the batch (never the table, the quarantine, the review queue or the per-trace
audit). Recall per ``(language, entity_type)`` is what ``flywheel_pii_canary_recall``
reports; a run below ``FLYWHEEL_CURATE__CANARY_MIN_RECALL`` commits nothing.

A value *survives* when its anonymised record still holds it, compared without spaces,
dashes, dots, slashes, parentheses and plus signs and ignoring case (``555-0142`` survives
as ``5550142``), or holds a word of it that identifies on its own (a name's given name or
surname). A canary the anonymiser could not process at all counts as not removed: the check
cannot vouch for it. The values themselves are never logged, audited or reported.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infra.errors import PrivacyCheckFailed
from tasks.curate.canaries import survives

if TYPE_CHECKING:
    from infra.metrics.stage import StageReport
    from infra.runtime import Runtime
    from tasks.curate.canaries import CanaryBatch
    from tasks.curate.rows import CuratedExample
    from tasks.datasets import Quarantine

RECALL_METRIC = "flywheel_pii_canary_recall"
AUDIT_EVENT = "curate.canary_check"  # one per run: what the weekly run reads

Key = tuple[str, str]  # (language, entity_type)


@dataclass
class CanaryCheck:
    """What the canaries of one run showed: values planted and removed per ``(language,
    entity_type)``, the seed that drew them and the recall the run needs."""

    min_recall: float
    seed: int
    records: int = 0
    planted: Counter[Key] = field(default_factory=Counter)
    removed: Counter[Key] = field(default_factory=Counter)
    unprocessed: int = 0  # canary records the anonymiser failed on (quarantined if real)

    def recall(self) -> dict[Key, float]:
        """Removed / planted per ``(language, entity_type)``."""
        return {k: self.removed[k] / n for k, n in sorted(self.planted.items()) if n}

    def below(self) -> dict[Key, float]:
        """The ``(language, entity_type)`` pairs whose recall is under the minimum."""
        return {k: r for k, r in self.recall().items() if r < self.min_recall}

    @property
    def passed(self) -> bool:
        """Whether every pair reached the minimum recall."""
        return not self.below()

    def survived(self) -> int:
        """How many planted values survived anonymisation."""
        return sum(self.planted.values()) - sum(self.removed.values())

    def message(self, window: str) -> str:
        """One line: what leaked (types and rates only, never a value), the seed that drew the
        canaries (synthetic: replaying it finds the value), and that nothing was committed."""
        worst = ", ".join(f"{lang} {etype} {r:.2f}" for (lang, etype), r in self.below().items())
        broken = f"; {self.unprocessed} canary record(s) failed anonymisation" * bool(
            self.unprocessed
        )
        return (
            f"curate {window}: {self.survived()} of {sum(self.planted.values())} canary values "
            f"survived anonymisation (recall {worst} < FLYWHEEL_CURATE__CANARY_MIN_RECALL "
            f"{self.min_recall}{broken}; FLYWHEEL_CURATE__CANARY_SEED={self.seed} draws the "
            "same canaries again); nothing committed"
        )

    def details(self) -> dict[str, Any]:
        """The audit event's details: counts, recalls and the seed, never a value."""
        return {
            "seed": self.seed,
            "records": self.records,
            "min_recall": self.min_recall,
            "passed": self.passed,
            "unprocessed": self.unprocessed,
            "recall": [
                {
                    "language": lang,
                    "entity_type": etype,
                    "planted": self.planted[(lang, etype)],
                    "removed": self.removed[(lang, etype)],
                    "recall": round(r, 4),
                }
                for (lang, etype), r in self.recall().items()
            ],
        }

    def labelled(self) -> dict[str, float]:
        """Recall per ``"language/entity_type"`` (the run summary's form)."""
        return {f"{lang}/{etype}": round(r, 4) for (lang, etype), r in self.recall().items()}

    def report(self, report: StageReport) -> None:
        """The run's ``flywheel_pii_canary_recall`` gauges (this run's pairs only)."""
        report.replace(RECALL_METRIC)  # a pair no longer planted must not keep its old value
        for (lang, etype), r in self.recall().items():
            report.gauge(RECALL_METRIC, r, language=lang, entity_type=etype)


def _texts(example: CuratedExample) -> list[str]:
    """Every text of an anonymised row as it would be stored (messages decoded)."""
    texts = [example.get("question") or "", example.get("answer") or ""]
    texts += list(example.get("contexts") or [])
    for m in json.loads(example.get("messages") or "[]"):
        if isinstance(m.get("content"), str):
            texts.append(m["content"])
        for call in m.get("tool_calls") or []:
            texts.append(str((call.get("function") or {}).get("arguments") or ""))
    return texts


def check_canaries(
    batch: CanaryBatch,
    examples: list[CuratedExample],
    quarantined: list[Quarantine],
    *,
    min_recall: float,
) -> tuple[CanaryCheck, list[CuratedExample], list[Quarantine]]:
    """Check every canary of ``batch`` against its anonymised row; returns the check and the
    batch's anonymised rows and quarantine rows without the canaries."""
    check = CanaryCheck(min_recall=min_recall, seed=batch.seed, records=len(batch.canaries))
    by_id = {c.trace_id: c for c in batch.canaries}
    seen: set[str] = set()
    for example in examples:
        canary = by_id.get(example["trace_id"])
        if canary is None:
            continue
        seen.add(canary.trace_id)
        texts = _texts(example)
        for value in canary.values:
            key = (value.language, value.entity_type)
            check.planted[key] += 1
            check.removed[key] += not survives(value, texts)
    for canary in batch.canaries:
        if canary.trace_id not in seen:  # the anonymiser failed on it: it cannot vouch
            check.unprocessed += 1
            for value in canary.values:
                check.planted[(value.language, value.entity_type)] += 1
    real = [e for e in examples if e["trace_id"] not in by_id]
    kept_q = [q for q in quarantined if json.loads(q["record"]).get("trace_id") not in by_id]
    return check, real, kept_q


def enforce_canaries(
    rt: Runtime, report: StageReport, check: CanaryCheck, *, windows: list[str], rows: int
) -> None:
    """Publish the run's canary recall; below the bar, audit the check (counts and seed),
    count the ``rows`` not committed, mark ``windows`` (the run's window last, and the
    earlier windows it was to re-curate) for the next run, and stop the run.

    Raises:
        PrivacyCheckFailed: a canary value survived beyond the bar (the one-line message).
    """
    from prefect import get_run_logger

    from infra.audit import record_event
    from tasks.curate.gates import STAGE
    from tasks.feedback import mark_stale

    check.report(report)
    if check.passed:
        return
    window = windows[-1]
    report.records("not_committed_canary_leak", rows)
    record_event(
        rt.catalog,
        event_type=AUDIT_EVENT,
        actor=STAGE,
        subject=window,
        details=check.details(),
    )
    for w in windows:  # the next run curates them again, with new canaries
        mark_stale(rt.store, stage=STAGE, window=w)
    message = check.message(window)
    get_run_logger().error(message)
    raise PrivacyCheckFailed(message)
