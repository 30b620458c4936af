"""Whether the weekly run may train, as far as privacy goes: the canary recall of the last
day's curate runs (each run audits its check as ``curate.canary_check``:
:mod:`tasks.curate.canary_check`), pooled per language and entity type, against
``FLYWHEEL_CURATE__CANARY_MIN_RECALL``. A day below it means the anonymiser let planted
values through, so rows it committed that day may hold personal data it missed: the run does
not train. A person may train anyway with a reason (the weekly run's ``privacy_override``),
which is audited with the recall it overrode; so is every refusal.

A day without any canary check (curate did not run, or ``FLYWHEEL_CURATE__CANARY_RECORDS`` is
0) holds no evidence either way: the run trains and says so in its log.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from prefect import task

from infra.errors import PrivacyCheckFailed
from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.audit import AuditRow

CHECK_EVENT = "curate.canary_check"  # tasks.curate.canary_check.AUDIT_EVENT
ACTOR = "train-and-release"
DAY = timedelta(days=1)

Key = tuple[str, str]  # (language, entity_type)


@dataclass
class CanaryDay:
    """The canary checks of the curate runs in one period, pooled per language and type."""

    min_recall: float
    since: datetime
    runs: int = 0
    failed_runs: int = 0
    planted: Counter[Key] = field(default_factory=Counter)
    removed: Counter[Key] = field(default_factory=Counter)

    def recall(self) -> dict[Key, float]:
        """Removed / planted per ``(language, entity_type)`` over the period."""
        return {k: self.removed[k] / n for k, n in sorted(self.planted.items()) if n}

    def below(self) -> dict[Key, float]:
        """The pairs under the minimum."""
        return {k: r for k, r in self.recall().items() if r < self.min_recall}

    def refusal(self) -> str | None:
        """One line saying why not to train, or None when the period was clean."""
        below = self.below()
        if not below:
            return None
        worst = ", ".join(f"{lang} {etype} {r:.2f}" for (lang, etype), r in below.items())
        return (
            f"the last day's canary recall is below FLYWHEEL_CURATE__CANARY_MIN_RECALL "
            f"{self.min_recall} ({worst}; {self.failed_runs} of {self.runs} curate runs "
            f"leaked canaries): not training on data the anonymiser may have missed"
        )

    def details(self) -> dict[str, Any]:
        """Audit details: the period, run counts and each pair's recall (no values)."""
        return {
            "since": self.since.isoformat(),
            "runs": self.runs,
            "failed_runs": self.failed_runs,
            "min_recall": self.min_recall,
            "recall": {
                f"{lang}/{etype}": round(r, 4) for (lang, etype), r in self.recall().items()
            },
        }


def canary_day(catalog: Catalog, *, min_recall: float, now: datetime | None = None) -> CanaryDay:
    """The canary checks audited in the 24 hours before ``now`` (default: now)."""
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual

    from infra.catalog import scan

    since = (now or datetime.now(UTC)) - DAY
    where = And(EqualTo("event_type", CHECK_EVENT), GreaterThanOrEqual("at", since.isoformat()))
    day = CanaryDay(min_recall=min_recall, since=since)
    rows: list[AuditRow] = scan(catalog, "audit_log", where).to_pylist()
    for row in rows:
        details = json.loads(row["details"] or "{}")
        day.runs += 1
        day.failed_runs += details.get("passed") is False
        for pair in details.get("recall") or []:
            key = (str(pair["language"]), str(pair["entity_type"]))
            day.planted[key] += int(pair["planted"])
            day.removed[key] += int(pair["removed"])
    return day


def check_training_privacy(
    catalog: Catalog, *, min_recall: float, override: str | None, now: datetime | None = None
) -> str:
    """Refuse to train on a day whose canaries leaked, unless a person gave a reason
    (``override``: audited as ``train.privacy_override``); returns the line to log.

    Raises:
        PrivacyCheckFailed: the day is below the bar and no reason was given (audited as
            ``train.privacy_refused``).
    """
    from infra.audit import record_event

    day = canary_day(catalog, min_recall=min_recall, now=now)
    why = day.refusal()
    if why is None:
        if not day.runs:
            return "privacy: no curate canary check in the last day (nothing to go by)"
        return f"privacy: {day.runs} curate canary checks in the last day, all at the bar"
    reason = (override or "").strip()
    event = "train.privacy_override" if reason else "train.privacy_refused"
    details = {**day.details(), **({"reason": reason} if reason else {})}
    record_event(catalog, event_type=event, actor=ACTOR, subject="weekly", details=details)
    if not reason:
        raise PrivacyCheckFailed(
            f"train-and-release: {why}; fix the anonymiser, or run it again with "
            "privacy_override=REASON to train anyway (audited)"
        )
    return f"privacy: training although {why.split(' (')[0]}; reason (audited): {reason}"


@task(**IO_RETRIES)
def check_training_privacy_task(
    catalog: Catalog, *, min_recall: float, override: str | None
) -> str:
    """Returns the line to log (as :func:`check_training_privacy`); a refusal fails the task
    and is not retried."""
    return check_training_privacy(catalog, min_recall=min_recall, override=override)
