"""The counts of one curate run and the Markdown artifact that shows them (no personal data)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tasks.curate.kanon import KDecision


@dataclass(kw_only=True)
class CurateResult:
    """Counts of one curate run (no personal data)."""

    window: str
    read: int
    written: int
    train: int
    rejected_only: int
    k_withheld: int
    released: int
    quarantined: int
    dropped: dict[str, int]
    pii_entities: dict[str, int]
    snapshot_id: int | None
    withdrawn: int = 0  # rows of earlier windows removed because consent was withdrawn
    # traces dropped as "reward_incomplete", by why (stage 2's words, naming the judge)
    ineligible: dict[str, int] | None = None
    recurated: list[str] | None = None  # earlier windows redone for late feedback


def curate_result(
    *,
    window: str,
    read: int,
    decision: KDecision,
    dropped: Counter[str],
    pii: Counter[str],
    quarantined: int,
    snapshot_id: int | None,
    withdrawn: int,
    ineligible: Counter[str] | None = None,
) -> CurateResult:
    """The run's counts from what k-anonymity decided and what the gates dropped."""
    roles = Counter(r["eligible_as"] for r in decision.release)
    return CurateResult(
        window=window,
        read=read,
        written=len(decision.release),
        train=roles["train"],
        rejected_only=roles["rejected_only"],
        k_withheld=len(decision.hold),
        released=len(decision.released_ids),
        quarantined=quarantined,
        dropped=dict(sorted(dropped.items())),
        pii_entities=dict(sorted(pii.items())),
        snapshot_id=snapshot_id,
        withdrawn=withdrawn,
        ineligible=dict((ineligible or Counter()).most_common()),
    )


def summary_markdown(result: CurateResult) -> str:
    """The run's artifact: what entered, what left, and why (counts only)."""
    lines = [
        f"# curate {result.window}",
        "",
        "| | traces |",
        "|---|---:|",
        f"| read | {result.read} |",
        f"| written (train) | {result.train} |",
        f"| written (rejected_only) | {result.rejected_only} |",
        f"| released from earlier windows | {result.released} |",
        f"| withheld by k-anonymity (held back) | {result.k_withheld} |",
        f"| quarantined | {result.quarantined} |",
        f"| removed from earlier windows (consent withdrawn) | {result.withdrawn} |",
    ]
    lines += [f"| dropped: {reason} | {n} |" for reason, n in result.dropped.items()]
    if result.ineligible:
        lines += [
            "",
            "| not training-eligible (reward incomplete) because | traces |",
            "|---|---:|",
        ]
        lines += [f"| {why} | {n} |" for why, n in result.ineligible.items()]
    lines += ["", "| PII entity type | removed |", "|---|---:|"]
    lines += [f"| {etype} | {n} |" for etype, n in result.pii_entities.items()] or ["| none | 0 |"]
    lines += [
        "",
        f"Snapshot of flywheel.training_examples: `{result.snapshot_id}`. Held-back rows wait "
        "in `curate/held/` until their question pattern has k distinct users.",
    ]
    return "\n".join(lines)
