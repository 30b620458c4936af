"""Stage 3 flow: ``curate``."""

from __future__ import annotations

from datetime import datetime

from prefect import flow, get_run_logger, unmapped
from prefect.artifacts import create_markdown_artifact

from infra.errors import ObjectNotFound
from infra.keys import parse_window_start, window_id
from infra.metrics import StageReport
from infra.runners import task_runner
from infra.runtime import Runtime
from tasks.curate.anonymize import anonymize_task, chunked, count_entities
from tasks.curate.commit import audit_events, audit_task, commit_task
from tasks.curate.dedup import record_kept_task, seen_before_task
from tasks.curate.gates import apply_gates, join_scores, load_inputs_task, quarantine_record
from tasks.curate.kanon import canonical_patterns, held_task, k_anonymize, k_state_task
from tasks.curate.summary import CurateResult, curate_result, summary_markdown
from tasks.curate.trace_audit import trace_audit_rows, trace_audit_task
from tasks.datasets import replace_quarantine_task, training_exclusions
from tasks.feedback import clear_stale, mark_stale, stale_windows_task
from tasks.pii.engine import PiiConfig
from tasks.review import push_review_task, queue_review_task

# Traces per anonymisation task, in spaCy batches (512 at the default batch size): the unit
# the task runner (FLYWHEEL_TASK_RUNNER: threads, dask, ray) spreads out.
CHUNK_BATCHES = 8


@flow(name="curate", log_prints=False)
def curate(window_start: datetime | None = None) -> CurateResult:
    """Curate a scored window into flywheel.training_examples, the privacy boundary.

    Drops traces of users who withdrew consent, errors, slow answers and duplicates; keeps
    answers below the reward bar only as the "rejected" side of a preference pair; removes
    personal data (names, e-mails, phones, cards, SSNs, IBANs, account numbers, addresses)
    with Presidio; holds back questions fewer than k users asked until more do. Rerunning a
    window replaces it. Runs on the window collect and score wrote (default: last closed hour),
    then re-curates earlier windows that late user feedback made score redo. Traces missing a
    required reward component (e.g. no judge verdict and no user feedback) are dropped, and
    the run says how many and why.

    Args:
        window_start: The hour to curate, on the hour in UTC (e.g. 2026-11-22T10:00:00Z), as
            collect and score wrote it. Empty: the last closed hour.
    """
    logger = get_run_logger()
    rt = Runtime.from_env()
    cfg = rt.settings.curate
    window = window_id(parse_window_start(window_start))
    stale = stale_windows_task(rt.store, stage="curate", exclude=window)
    for w in [*stale, window]:  # claimed now, so the re-curate runs below do not recurse
        clear_stale(rt.store, stage="curate", window=w)
    with rt.reporting("curate") as report:
        rollouts, scores = load_inputs_task(rt.store, window)
        rows, unscored = join_scores(rollouts, scores)
        # re-checked now (consent may change after collect); opt-in: no grant, no training
        opted_out = training_exclusions(rt.catalog, mode=rt.settings.consent_mode)
        earlier = seen_before_task(rt.store, window=window, horizon_days=cfg.dedup_days)
        gated = apply_gates(rows, cfg, opted_out=opted_out, seen_before=earlier)
        chunks = chunked(gated.kept, cfg.batch_size * CHUNK_BATCHES)
        config = PiiConfig.from_settings(cfg)  # plain data: each worker loads its own engine
        with task_runner(rt.settings) as runner:  # a temporary cluster lives only this long
            # the base TaskRunner.map types its task as returning R | Coroutine[R], which a
            # sync task (Task is invariant in R) never matches; the threads/Dask/Ray runners
            # accept it
            futures = runner.map(
                anonymize_task,  # type: ignore[arg-type]
                {"rows": chunks, "config": unmapped(config)},
            )
            parts = futures.result()  # in chunk order, whichever worker ran them
        examples = [row for good, _bad in parts for row in good]
        bad = [quarantine_record(r, "no score row for this trace") for r in unscored]
        bad += [q for _good, broken in parts for q in broken]
        state = k_state_task(rt.catalog, rt.store, window=window, opted_out=opted_out)
        if cfg.pattern_grouping == "embedding":  # paraphrases share a pattern
            examples = canonical_patterns(examples, state, threshold=cfg.paraphrase_threshold)
        decision = k_anonymize(
            examples, pending=state.pending, table_members=state.members, k=cfg.k_anonymity
        )
        # before the commit, which drops the per-finding entity types from the rows it writes
        per_trace = trace_audit_rows(
            window,
            released=[r for r in decision.release if r["window"] == window],
            held=decision.hold,
            quarantined=bad,
            k=cfg.k_anonymity,
        )
        snapshot = commit_task(
            rt.catalog,
            window=window,
            rows=decision.release,
            released_ids=decision.released_ids,
            opted_out=opted_out,
        )
        in_table = state.in_table | set(decision.released_ids)
        held_task(
            rt.store, window=window, hold=decision.hold, in_table=in_table, opted_out=opted_out
        )
        replace_quarantine_task(rt.catalog, stage="curate", window=window, rows=bad)
        record_kept_task(
            rt.store,
            window=window,
            keys=[r["_dedup_key"] for r in gated.kept],
            horizon_days=cfg.dedup_days,
        )
        review = queue_review_task(
            rt.catalog, window=window, rows=decision.release, policy=rt.settings.review
        )
        _to_annotation_queue(rt, [r["trace_id"] for r in review])
        for reason in ("random", "edge"):
            queued = sum(r["reason"] == reason for r in review)
            report.count("flywheel_review_queued_total", queued, reason=reason)
        pii = count_entities(examples)
        audit = audit_events(
            window,
            dropped=gated.dropped,
            pii=pii,
            decision=decision,
            k=cfg.k_anonymity,
            written=len(decision.release),
            withdrawn=state.withdrawn,
        )
        audit_task(rt.catalog, audit)
        trace_audit_task(rt.catalog, window, per_trace)
        result = curate_result(
            window=window,
            read=rollouts.num_rows,
            decision=decision,
            dropped=gated.dropped,
            pii=pii,
            quarantined=len(bad),
            snapshot_id=snapshot,
            withdrawn=state.withdrawn,
            ineligible=gated.ineligible,
        )
        _report(report, result)
    create_markdown_artifact(
        key="curate-summary", markdown=summary_markdown(result), description=f"curate {window}"
    )
    logger.info("curate %s: %d traces queued for human review", window, len(review))
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
    for why, n in (result.ineligible or {}).items():
        logger.warning("curate %s: %d trace(s) not training-eligible: %s", window, n, why)
    result.recurated = _recurate(rt, stale)
    return result


def _recurate(rt: Runtime, windows: list[str]) -> list[str]:
    """Re-curate the windows that late feedback rescored (each a subflow run; a failed one is
    marked stale again for the next run)."""
    done = []
    for w in windows:
        try:
            curate(window_start=parse_window_start(w))
        except ObjectNotFound:  # its rollouts or scores are gone (retention, erasure)
            get_run_logger().warning("curate: window %s is gone, not re-curated", w)
            continue
        except Exception:
            mark_stale(rt.store, stage="curate", window=w)
            raise
        done.append(w)
    return done


def _report(report: StageReport, result: CurateResult) -> None:
    report.records("in", result.read)
    report.records("out", result.written)
    report.records("quarantined", result.quarantined)
    report.records("k_withheld", result.k_withheld)
    report.records("dropped_consent_withdrawn", result.withdrawn)
    for reason, n in result.dropped.items():
        report.records(f"dropped_{reason}", n)
    for entity, n in result.pii_entities.items():
        report.count("flywheel_pii_entities_total", n, entity_type=entity)


def _to_annotation_queue(rt: Runtime, trace_ids: list[str]) -> None:
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
