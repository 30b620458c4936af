"""Stage 1 flow: ``collect``."""

from __future__ import annotations

from datetime import datetime

from prefect import flow

from infra.flow_docs import described
from infra.keys import parse_window_start, window_id
from infra.lease import erasure_lease
from infra.parameters import Hours
from infra.runtime import Runtime
from tasks.collect import (
    CollectCounts,
    CollectResult,
    collect_result,
    dedupe,
    drop_opted_out,
    invalid_rows,
    publish_collect,
    read_window_task,
    report_collect,
    share_unconfigured,
    to_parquet,
    write_batch_task,
)
from tasks.datasets import opted_out_keys, replace_quarantine_task
from tasks.feedback import refresh_feedback_task


@described
@flow(name="collect", log_prints=False)
def collect(window_start: datetime | None = None, hours: Hours = 1) -> CollectResult:
    """Collect rollouts: read every agent trace of the window (default: the last closed hour)
    from the trace source, quarantine malformed records with a reason, count traces naming a
    workload that FLYWHEEL_WORKLOADS does not list as the shared release's, drop users who
    opted out of training, and write rollouts/window=<start>/batch.parquet. Rerunning a window replaces it.
    Feedback given since the last run to traces of the last 24 hours (feedback_lookahead_hours)
    updates their windows, which the next score and curate runs then redo. A forget-user or
    retention run in flight is waited for (the erasure lease), so none runs between the read
    and the write.

    Args:
        window_start: First hour to read, on the hour in UTC (e.g. 2026-11-22T10:00:00Z).
            Empty: the last closed hour.
        hours: How many hours from window_start to read into this one batch (1 to 168).
    """
    rt = Runtime.from_env()
    start = parse_window_start(window_start)
    window = window_id(start)
    with rt.reporting("collect") as report:
        source = rt.trace_source()
        # shared erasure lease: a forget-user never runs between the read and the write
        with erasure_lease(rt.store, rt.settings).shared():
            batch = read_window_task(source, start=start, hours=hours)
            bad = invalid_rows(batch, window=window)
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
        counts = CollectCounts(
            written=len(records),
            quarantined=len(bad),
            opted_out=opted_out,
            duplicates=duplicates,
            unconfigured=unconfigured,
        )
        result = collect_result(batch, counts, window=window, key=key, late=late)
        report_collect(report, result, late)
    publish_collect(result, late, hours=hours)
    return result
