"""Human review in the loop (the design's "human-in-the-loop verification").

Each curate run queues, from the rows it wrote (already anonymised), ``sample_rate`` of the
eligible traces at random (at least ``min_items`` when there are any) plus the edge cases:
the ``edge_rate`` share with the largest ``|reward - feedback|`` (a high reward users disliked,
or the reverse). The queue is the Iceberg table ``review_queue``; a rerun of a window draws the
same sample (seeded by the window) and keeps every label already given.

People label through ``flywheel review export`` (CSV or JSONL with an empty ``human_score``
column, 0..1) and ``flywheel review import``, or in a Langfuse annotation queue in production.
Labels are stored in the queue; the Spearman correlation of reward and human score is computed
per ISO week of labelling and pushed (``flywheel_reward_human_spearman`` with
``flywheel_reward_human_samples``); an alert fires below 0.7. Training takes a labelled trace's
human score as its reward (``override_rewards``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict

from prefect import task

from infra.errors import ReviewFileError
from infra.task_retries import IO_RETRIES
from tasks.datasets import BufferedExample, TrainingExample

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.metrics.stage import StageReport
    from infra.runtime import Runtime
    from infra.settings import ReviewSettings

TABLE = "review_queue"
EXPORT_FIELDS = (
    "trace_id",
    "window",
    "reason",
    "reward",
    "reward_feedback",
    "question",
    "answer",
    "model_version",
    "human_score",
    "reviewer",
)


class ReviewItem(TypedDict):
    """A ``review_queue`` row (infra/catalog_schemas.py): a queued trace and its label."""

    trace_id: str
    window: str
    reason: str  # random | edge
    reward: float | None
    reward_feedback: float | None
    question: str | None
    answer: str | None
    model_version: str | None
    queued_at: datetime
    human_score: float | None  # 0..1; None until labelled
    reviewer: str | None  # a pseudonym, never a name or e-mail
    labelled_at: datetime | None


def sample_for_review(
    rows: Sequence[TrainingExample], *, window: str, policy: ReviewSettings
) -> list[ReviewItem]:
    """Queue rows for one curated window: a seeded random share of the eligible rows plus the
    edge cases (largest |reward - feedback| among rows with feedback)."""
    eligible = sorted(
        (r for r in rows if r.get("eligible_as") == "train"), key=lambda r: r["trace_id"]
    )
    n_random = math.ceil(len(eligible) * policy.sample_rate)
    if eligible:
        n_random = min(len(eligible), max(n_random, policy.min_items))
    seed = int(hashlib.sha256(window.encode()).hexdigest()[:16], 16)
    picked = random.Random(seed).sample(eligible, n_random)
    chosen = {r["trace_id"] for r in picked}
    with_feedback = [
        r
        for r in rows
        if r.get("reward_feedback") is not None
        and r.get("reward") is not None
        and r["trace_id"] not in chosen
    ]
    n_edge = math.ceil(len(rows) * policy.edge_rate)
    edges = sorted(  # every row here has feedback: ``or 0.0`` never applies
        with_feedback,
        key=lambda r: (-abs(r["reward"] - (r["reward_feedback"] or 0.0)), r["trace_id"]),
    )[:n_edge]
    now = datetime.now(UTC)
    return [
        _queue_row(r, window=window, reason=reason, at=now)
        for reason, group in (("random", picked), ("edge", edges))
        for r in sorted(group, key=lambda r: r["trace_id"])
    ]


def _queue_row(row: TrainingExample, *, window: str, reason: str, at: datetime) -> ReviewItem:
    return {
        "trace_id": row["trace_id"],
        "window": window,
        "reason": reason,
        "reward": row.get("reward"),
        "reward_feedback": row.get("reward_feedback"),
        "question": row.get("question"),
        "answer": row.get("answer"),
        "model_version": row.get("model_version"),
        "queued_at": at,
        "human_score": None,
        "reviewer": None,
        "labelled_at": None,
    }


def queue_window(catalog: Catalog, *, window: str, rows: list[ReviewItem]) -> int:
    """Replace the window's unlabelled queue items with ``rows`` (labelled items are kept and
    never queued twice); returns how many items were queued."""
    from pyiceberg.expressions import And, EqualTo, IsNull, NotNull

    from infra.catalog import replace_where, scan

    labelled = scan(catalog, TABLE, And(EqualTo("window", window), NotNull("labelled_at")))
    done = set(labelled.column("trace_id").to_pylist())
    fresh = [r for r in rows if r["trace_id"] not in done]
    replace_where(catalog, TABLE, And(EqualTo("window", window), IsNull("labelled_at")), fresh)
    return len(fresh)


def _columns(table: Any, *names: str) -> list[list[Any]]:
    return [table.column(n).to_pylist() for n in names]


def pending_items(catalog: Catalog, *, include_labelled: bool = False) -> list[ReviewItem]:
    """Queue items to review (oldest window first)."""
    from pyiceberg.expressions import IsNull

    from infra.catalog import scan

    rows: list[ReviewItem] = scan(
        catalog, TABLE, None if include_labelled else IsNull("labelled_at")
    ).to_pylist()
    return sorted(rows, key=lambda r: (r["window"], r["reason"], r["trace_id"]))


# ---- files a person fills in ----------------------------------------------------------------


def export_items(items: list[ReviewItem], *, fmt: str) -> str:
    """The items as CSV or JSONL with the columns a reviewer fills (``human_score``: 0..1,
    ``reviewer``: a pseudonym)."""
    out = [{k: item.get(k) for k in EXPORT_FIELDS} for item in items]
    if fmt == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in out)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=EXPORT_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in out:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()


@dataclass(frozen=True, kw_only=True)
class Label:
    """A person's label of a reviewed trace."""

    trace_id: str
    human_score: float
    reviewer: str | None


def parse_labels(text: str, *, fmt: str) -> tuple[list[Label], int]:
    """(labels, rows left unlabelled) of a filled-in export.

    Raises:
        ReviewFileError: a row is malformed (its line named); nothing is returned.
    """
    rows = _rows(text, fmt)
    labels: list[Label] = []
    blank = 0
    for line, row in rows:
        trace_id = str(row.get("trace_id") or "").strip()
        if not trace_id:
            raise ReviewFileError(f"line {line}: no trace_id")
        raw = row.get("human_score")
        if raw is None or str(raw).strip() == "":
            blank += 1
            continue
        try:
            score = float(raw)
        except (TypeError, ValueError):
            raise ReviewFileError(
                f"line {line}: human_score {str(raw)[:20]!r} is not a number in 0..1"
            ) from None
        if not 0.0 <= score <= 1.0:
            raise ReviewFileError(f"line {line}: human_score {score:g} is outside 0..1")
        reviewer = str(row.get("reviewer") or "").strip() or None
        labels.append(Label(trace_id=trace_id, human_score=score, reviewer=reviewer))
    return labels, blank


def _rows(text: str, fmt: str) -> list[tuple[int, dict[str, Any]]]:
    if fmt == "jsonl":
        out = []
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise ReviewFileError(f"line {i}: not a JSON object") from None
            if not isinstance(row, dict):
                raise ReviewFileError(f"line {i}: not a JSON object")
            out.append((i, row))
        return out
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or not {"trace_id", "human_score"} <= set(reader.fieldnames):
        raise ReviewFileError("line 1: the header needs the columns trace_id and human_score")
    return [(i, row) for i, row in enumerate(reader, start=2)]


def store_labels(catalog: Catalog, labels: list[Label]) -> int:
    """Write the labels into their queue items (a label given again replaces the earlier one).

    Raises:
        ReviewFileError: a trace id is not in the review queue (nothing written).
    """
    from pyiceberg.expressions import In

    from infra.catalog import replace_where, scan

    if not labels:
        return 0
    by_id = {label.trace_id: label for label in labels}
    items: list[ReviewItem] = scan(catalog, TABLE, In("trace_id", sorted(by_id))).to_pylist()
    unknown = sorted(set(by_id) - {r["trace_id"] for r in items})
    if unknown:
        shown = ", ".join(unknown[:3]) + (
            f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        )
        raise ReviewFileError(f"not in the review queue: {shown} (nothing imported)")
    now = datetime.now(UTC)
    for item in items:
        label = by_id[item["trace_id"]]
        item.update(
            {"human_score": label.human_score, "reviewer": label.reviewer, "labelled_at": now}
        )
    replace_where(catalog, TABLE, In("trace_id", sorted(by_id)), items)
    return len(items)


# ---- what the labels say ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class WeekCorrelation:
    """How human labels and rewards agreed in one week."""

    week: str  # ISO week of labelling, e.g. 2026-W47
    samples: int
    spearman: float | None  # None: fewer than 3 labels, or a constant side


def weekly_correlation(items: list[ReviewItem]) -> list[WeekCorrelation]:
    """Spearman correlation of reward and human score per ISO week of labelling, oldest first."""
    from scipy.stats import spearmanr

    weeks: dict[str, list[tuple[float, float]]] = {}
    for item in items:
        at, human, reward = item.get("labelled_at"), item.get("human_score"), item.get("reward")
        if at is None or human is None or reward is None:
            continue
        year, number, _ = at.isocalendar()
        weeks.setdefault(f"{year}-W{number:02d}", []).append((float(reward), float(human)))
    out = []
    for week in sorted(weeks):
        pairs = weeks[week]
        rho: float | None = None
        if len(pairs) >= 3 and len({r for r, _ in pairs}) > 1 and len({h for _, h in pairs}) > 1:
            rho = float(spearmanr([r for r, _ in pairs], [h for _, h in pairs]).statistic)
        out.append(WeekCorrelation(week=week, samples=len(pairs), spearman=rho))
    return out


def human_rewards(catalog: Catalog, trace_ids: list[str]) -> dict[str, float]:
    """The human score of every labelled trace among ``trace_ids`` (the training override)."""
    from pyiceberg.expressions import And, In, NotNull

    from infra.catalog import scan

    if not trace_ids:
        return {}
    rows = scan(catalog, TABLE, And(In("trace_id", sorted(set(trace_ids))), NotNull("labelled_at")))
    return dict(zip(*_columns(rows, "trace_id", "human_score"), strict=True))


def override_rewards(catalog: Catalog, rows: list[BufferedExample]) -> int:
    """Replace the reward of every labelled row with its human score; returns how many."""
    human = human_rewards(catalog, [r["trace_id"] for r in rows])
    for row in rows:
        if row["trace_id"] in human:
            row["reward"] = human[row["trace_id"]]
    return sum(r["trace_id"] in human for r in rows)


@task(**IO_RETRIES)
def queue_review_task(
    catalog: Catalog, *, window: str, rows: Sequence[TrainingExample], policy: ReviewSettings
) -> list[ReviewItem]:
    """Returns the items queued for human review from a curated window."""
    items = sample_for_review(rows, window=window, policy=policy)
    queue_window(catalog, window=window, rows=items)
    return items


@task(**IO_RETRIES)
def push_review_task(queue: Any, trace_ids: list[str]) -> int:
    """Returns how many traces were added to the Langfuse annotation queue."""
    return int(queue.add_traces(trace_ids))


def queue_for_review(
    rt: Runtime, report: StageReport, *, window: str, rows: Sequence[TrainingExample]
) -> list[ReviewItem]:
    """Queue a curated window's sample for human review (the ``review_queue`` table, and the
    Langfuse annotation queue when one is configured), count it by reason, and return it."""
    review = queue_review_task(rt.catalog, window=window, rows=rows, policy=rt.settings.review)
    to_annotation_queue(rt, [r["trace_id"] for r in review])
    for reason in ("random", "edge"):
        queued = sum(r["reason"] == reason for r in review)
        report.count("flywheel_review_queued_total", queued, reason=reason)
    return review


def to_annotation_queue(rt: Runtime, trace_ids: list[str]) -> None:
    """Production review: the queued traces also go to the Langfuse annotation queue."""
    queue_id = rt.settings.review.langfuse_queue_id
    if not queue_id or not trace_ids:
        return
    from infra.traces.langfuse_queue import LangfuseReviewQueue

    connection = LangfuseReviewQueue.connection(rt.settings.langfuse, "review queue")
    queue = LangfuseReviewQueue(**connection, queue_id=queue_id)
    try:
        push_review_task(queue, trace_ids)
    finally:
        queue.close()
