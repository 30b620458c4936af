"""The counts of one curate run, its metrics, the Markdown artifact that shows them and its log
lines (no personal data)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact

if TYPE_CHECKING:
    from infra.metrics.stage import StageReport
    from tasks.curate.commit import Curation
    from tasks.curate.gates import Gated
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
    # the run's canary recall per "language/entity_type" (empty: no canaries planted)
    canary_recall: dict[str, float] | None = None
    # per workload: the golden set's coverage of the window's prompts (tasks/golden_coverage)
    coverage: dict[str, dict[str, Any]] | None = None


def curate_result(
    *,
    window: str,
    read: int,
    decision: KDecision,
    gated: Gated,
    pii: Counter[str],
    quarantined: int,
    snapshot_id: int | None,
    withdrawn: int,
) -> CurateResult:
    """The run's counts from what k-anonymity decided and what the gates dropped (``gated``:
    its drops by reason, and the reward-incomplete ones by why)."""
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
        dropped=dict(sorted(gated.dropped.items())),
        pii_entities=dict(sorted(pii.items())),
        snapshot_id=snapshot_id,
        withdrawn=withdrawn,
        ineligible=dict(gated.ineligible.most_common()),
    )


def window_result(
    done: Curation, *, read: int, pii: Counter[str], snapshot_id: int | None
) -> CurateResult:
    """:func:`curate_result` of a window's curation: ``read`` traces, the PII entities removed
    by type, the table's snapshot after the commit, the canary recall of the run."""
    result = curate_result(
        window=done.window,
        read=read,
        decision=done.decision,
        gated=done.gated,
        pii=pii,
        quarantined=len(done.quarantined),
        snapshot_id=snapshot_id,
        withdrawn=done.state.withdrawn,
    )
    checked = (done.canary or {}).get("recall", [])
    result.canary_recall = {f"{c['language']}/{c['entity_type']}": c["recall"] for c in checked}
    return result


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
    if result.canary_recall:
        lines += ["", "| canary (language/type) | recall |", "|---|---:|"]
        lines += [f"| {key} | {r:.2f} |" for key, r in result.canary_recall.items()]
    for workload, cov in (result.coverage or {}).items():
        lines += [
            "",
            f"Golden set `{cov['golden_version']}` covers {cov['coverage']:.0%} of the "
            f"{cov['prompts']} {workload} prompts (TF-IDF similarity >= {cov['threshold']:g}).",
        ]
        if cov["clusters"]:  # sizes only: the artifact holds no text of users
            lines += ["", "| uncovered cluster | prompts |", "|---|---:|"]
            lines += [f"| {i} | {c['size']} |" for i, c in enumerate(cov["clusters"], start=1)]
    lines += ["", "| PII entity type | removed |", "|---|---:|"]
    lines += [f"| {etype} | {n} |" for etype, n in result.pii_entities.items()] or ["| none | 0 |"]
    lines += [
        "",
        f"Snapshot of flywheel.training_examples: `{result.snapshot_id}`. Held-back rows wait "
        "in `curate/held/` until their question pattern has k distinct users.",
    ]
    return "\n".join(lines)


def report_curate(report: StageReport, result: CurateResult) -> None:
    """The run's record counts by outcome and the PII entities it removed, by type."""
    report.records("in", result.read)
    report.records("out", result.written)
    report.records("quarantined", result.quarantined)
    report.records("k_withheld", result.k_withheld)
    report.records("dropped_consent_withdrawn", result.withdrawn)
    for reason, n in result.dropped.items():
        report.records(f"dropped_{reason}", n)
    for entity, n in result.pii_entities.items():
        report.count("flywheel_pii_entities_total", n, entity_type=entity)


def publish_curate(result: CurateResult, *, queued: int) -> None:
    """The run's ``curate-summary`` artifact and its log lines: the traces ``queued`` for human
    review, the counts, and a warning per reason traces were not training-eligible."""
    logger = get_run_logger()
    window = result.window
    create_markdown_artifact(
        key="curate-summary", markdown=summary_markdown(result), description=f"curate {window}"
    )
    logger.info("curate %s: %d traces queued for human review", window, queued)
    logger.info(
        "curate %s: %d read, %d written (%d train, %d rejected_only), %d withheld by k, "
        "%d quarantined, dropped %s",
        window,
        result.read,
        result.written,
        result.train,
        result.rejected_only,
        result.k_withheld,
        result.quarantined,
        result.dropped,
    )
    if result.canary_recall:
        logger.info(
            "curate %s: canary recall %.2f at the lowest (%d language/type pairs)",
            window,
            min(result.canary_recall.values()),
            len(result.canary_recall),
        )
    for why, n in (result.ineligible or {}).items():
        logger.warning("curate %s: %d trace(s) not training-eligible: %s", window, n, why)
