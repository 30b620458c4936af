"""Stage 1 flow: ``collect``."""

from __future__ import annotations

from datetime import datetime

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from infra.keys import parse_window_start, window_id
from infra.parameters import Hours
from infra.runtime import Runtime
from tasks.collect import (
    CollectResult,
    dedupe,
    drop_opted_out,
    read_window_task,
    share_unconfigured,
    to_parquet,
    write_batch_task,
)
from tasks.datasets import (
    opted_out_keys,
    quarantine_row,
    raw_line_pointer,
    replace_quarantine_task,
)
from tasks.feedback import refresh_feedback_task


@flow(name="collect", log_prints=False)
def collect(window_start: datetime | None = None, hours: Hours = 1) -> CollectResult:
    """Collect rollouts: read every agent trace of the window (default: the last closed hour)
    from the trace source, quarantine malformed records with a reason, count traces naming a
    workload that FLYWHEEL_WORKLOADS does not list as the shared release's, drop users who
    opted out of training, and write rollouts/window=<start>/batch.parquet. Rerunning a window replaces it.
    Feedback given since the last run to traces of the last 24 hours (feedback_lookahead_hours)
    updates their windows, which the next score and curate runs then redo.

    Args:
        window_start: First hour to read, on the hour in UTC (e.g. 2026-11-22T10:00:00Z).
            Empty: the last closed hour.
        hours: How many hours from window_start to read into this one batch (1 to 168).
    """
    logger = get_run_logger()
    rt = Runtime.from_env()
    start = parse_window_start(window_start)
    window = window_id(start)
    with rt.reporting("collect") as report:
        source = rt.trace_source()
        batch = read_window_task(source, start=start, hours=hours)
        bad = [
            quarantine_row(
                stage="collect", window=window, reason=reason, pointer=raw_line_pointer(line)
            )
            for line, reason in batch.invalid
        ]
        replace_quarantine_task(rt.catalog, stage="collect", window=window, rows=bad)
        records, duplicates = dedupe(batch.records)
        records, unconfigured = share_unconfigured(records, rt.settings.workloads)
        records, opted_out = drop_opted_out(
            records, opted_out=opted_out_keys(rt.catalog), salt=rt.settings.salt()
        )
        data = to_parquet(records, window=window, salt=rt.settings.salt())
        key = write_batch_task(rt.store, window=window, data=data)
        late = refresh_feedback_task(
            rt.store, source, lookahead_hours=rt.settings.feedback_lookahead_hours
        )
        result = CollectResult(
            window=window,
            read=len(batch.records) + len(bad) + sum(batch.dropped.values()),
            written=len(records),
            quarantined=len(bad),
            opted_out=opted_out,
            duplicates=duplicates,
            key=key,
            unconfigured_workload=unconfigured,
            dropped=dict(batch.dropped),
            feedback_changed=late.changed,
        )
        report.records("in", result.read)
        report.records("out", result.written)
        report.records("quarantined", result.quarantined)
        report.records("dropped_opted_out", result.opted_out)
        report.records("dropped_duplicate", result.duplicates)
        report.records("unconfigured_workload", result.unconfigured_workload)
        for reason, n in sorted(result.dropped.items()):
            report.records(f"dropped_{reason}", n)
        report.count("flywheel_feedback_late_total", late.traces)
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
    return result
