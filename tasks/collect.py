"""Stage 1 logic: read a window from a trace source, validate, give traces naming a workload
that is not configured to the shared release, drop opted-out users, write
``rollouts/window=<start>/batch.parquet``; then the run's counts, metrics, artifact and log
lines. Plain functions; the ``@task`` wrappers are thin."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact

from infra.keys import rollouts_key
from infra.privacy import user_key
from infra.settings.workloads import served_workload
from infra.task_retries import IO_RETRIES
from infra.traces import TraceRecord, TraceSource, WindowBatch
from tasks.datasets import ROLLOUT_SCHEMA, Quarantine, Rollout, quarantine_row, raw_line_pointer

if TYPE_CHECKING:
    from collections.abc import Collection

    from infra.metrics.stage import StageReport
    from infra.store import ObjectStore
    from tasks.feedback import FeedbackRefresh


@dataclass(kw_only=True)
class CollectResult:
    """Counts of one collect run (no personal data)."""

    window: str
    read: int
    written: int
    quarantined: int
    opted_out: int
    duplicates: int
    key: str
    # traces naming a workload FLYWHEEL_WORKLOADS does not list, kept as the shared release's
    unconfigured_workload: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # by the source, by reason
    # late feedback (tasks.feedback): traces of earlier windows whose feedback changed, by window
    feedback_changed: dict[str, int] = field(default_factory=dict)


def dedupe(records: list[TraceRecord]) -> tuple[list[TraceRecord], int]:
    """Keep the first record of each trace id (a sink may deliver twice)."""
    seen: set[str] = set()
    kept = []
    for record in records:
        if record.trace_id not in seen:
            seen.add(record.trace_id)
            kept.append(record)
    return kept, len(records) - len(kept)


def share_unconfigured(
    records: list[TraceRecord], workloads: Collection[str]
) -> tuple[list[TraceRecord], int]:
    """The records, those naming a workload that is not configured as the shared release's
    (``default``), as the gateway serves them: a source's tag or an old spool line never
    becomes a workload. Returns (records, how many were moved)."""
    kept, moved = [], 0
    for record in records:
        if (served := served_workload(record.workload, workloads)) != record.workload:
            record, moved = record.model_copy(update={"workload": served}), moved + 1
        kept.append(record)
    return kept, moved


def drop_opted_out(
    records: list[TraceRecord], *, opted_out: set[str], salt: str
) -> tuple[list[TraceRecord], int]:
    """Remove traces of users who opted out of training."""
    kept = [r for r in records if not r.user_id or user_key(r.user_id, salt) not in opted_out]
    return kept, len(records) - len(kept)


def read_window(source: TraceSource, *, start: datetime, hours: int) -> WindowBatch:
    """Returns the window's parsed traces and the lines that failed validation."""
    return source.read_window(start, start + timedelta(hours=hours))


def to_parquet(records: list[TraceRecord], *, window: str, salt: str) -> bytes:
    """The rollouts batch (:class:`~tasks.datasets.Rollout` rows) as Parquet bytes."""
    rows = [rollout_row(r, window=window, salt=salt) for r in records]
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=ROLLOUT_SCHEMA), sink)
    return sink.getvalue()


def rollout_row(record: TraceRecord, *, window: str, salt: str) -> Rollout:
    """A trace as the rollouts batch holds it: conversation and tool calls as JSON, the user
    as its salted key beside the id."""
    r = record
    return Rollout(
        trace_id=r.trace_id,
        session_id=r.session_id,
        user_id=r.user_id,
        user_key=user_key(r.user_id, salt) if r.user_id else None,
        workload=r.workload,
        prompt_group=r.prompt_group,
        messages=json.dumps(r.messages),
        question=r.question,
        contexts=r.contexts,
        answer=r.answer,
        tool_calls=json.dumps(r.tool_calls),
        model_version=r.model_version,
        temperature=r.temperature,
        top_p=r.top_p,
        latency_s=r.latency_s,
        tokens_in=r.tokens_in,
        tokens_out=r.tokens_out,
        finish_reason=r.finish_reason,
        error_count=r.error_count,
        feedback=r.feedback,
        created_at=r.created_at,
        route=r.route,
        pairing_id=r.pairing_id,
        logprobs=r.logprobs,
        window=window,
    )


read_window_task = task(**IO_RETRIES)(read_window)


@task(**IO_RETRIES)
def write_batch_task(store: ObjectStore, *, window: str, data: bytes) -> str:
    """Returns the key of the rollouts batch written (atomically, replacing a previous run)."""
    key = rollouts_key(window)
    store.put(key, data)
    return key


def invalid_rows(batch: WindowBatch, *, window: str) -> list[Quarantine]:
    """The ``quarantine`` rows of the lines the source could not parse, each with its reason
    and a pointer to the raw line (never its text)."""
    return [
        quarantine_row(
            stage="collect", window=window, reason=reason, pointer=raw_line_pointer(line)
        )
        for line, reason in batch.invalid
    ]


@dataclass(frozen=True, kw_only=True)
class CollectCounts:
    """What became of the window's traces: ``written`` to the batch, ``quarantined``, and
    those dropped as ``opted_out`` or ``duplicates``, or shared as ``unconfigured``."""

    written: int
    quarantined: int
    opted_out: int
    duplicates: int
    unconfigured: int


def collect_result(
    batch: WindowBatch,
    counts: CollectCounts,
    *,
    window: str,
    key: str,
    late: FeedbackRefresh,
) -> CollectResult:
    """The run's counts: ``read`` is every trace of the window, valid, quarantined or left out
    by the source."""
    return CollectResult(
        window=window,
        read=len(batch.records) + counts.quarantined + sum(batch.dropped.values()),
        written=counts.written,
        quarantined=counts.quarantined,
        opted_out=counts.opted_out,
        duplicates=counts.duplicates,
        key=key,
        unconfigured_workload=counts.unconfigured,
        dropped=dict(batch.dropped),
        feedback_changed=late.changed,
    )


def report_collect(report: StageReport, result: CollectResult, late: FeedbackRefresh) -> None:
    """The run's record counts by outcome, and the late feedback it found."""
    report.records("in", result.read)
    report.records("out", result.written)
    report.records("quarantined", result.quarantined)
    report.records("dropped_opted_out", result.opted_out)
    report.records("dropped_duplicate", result.duplicates)
    report.records("unconfigured_workload", result.unconfigured_workload)
    for reason, n in sorted(result.dropped.items()):
        report.records(f"dropped_{reason}", n)
    report.count("flywheel_feedback_late_total", late.traces)


def publish_collect(result: CollectResult, late: FeedbackRefresh, *, hours: int) -> None:
    """The run's ``collect-summary`` table artifact and its log lines (a warning when the
    window held no trace)."""
    logger = get_run_logger()
    window = result.window
    create_table_artifact(
        key="collect-summary",
        table=[
            {
                "window": window,
                "in": result.read,
                "out": result.written,
                "quarantined": result.quarantined,
                "opted_out": result.opted_out,
                "duplicates": result.duplicates,
            }
        ],
        description=f"collect {window}",
    )
    logger.info(
        "collect %s: %d in, %d written, %d quarantined, %d opted out",
        window,
        result.read,
        result.written,
        result.quarantined,
        result.opted_out,
    )
    if late.changed:
        logger.info(
            "collect %s: late feedback changed %d trace(s) in %d earlier window(s): %s; "
            "the next score and curate runs redo them",
            window,
            late.traces,
            len(late.changed),
            ", ".join(late.changed),
        )
    if result.read == 0:
        logger.warning("collect %s: no traces in this window (read %d hour(s))", window, hours)
