"""Stage 3 flow: ``curate``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from prefect import flow, get_run_logger, unmapped

from infra.errors import ObjectNotFound
from infra.flow_docs import described
from infra.keys import parse_window_start, window_id
from infra.lease import erasure_lease
from infra.metrics import StageReport
from infra.runners import task_runner
from infra.runtime import Runtime
from tasks.curate.anonymize import anonymize_task, chunked, count_entities
from tasks.curate.canaries import plant_canaries
from tasks.curate.canary_check import check_canaries, enforce_canaries
from tasks.curate.commit import Curation, audit_window, commit_window
from tasks.curate.dedup import seen_before_task
from tasks.curate.gates import Gated, apply_gates, join_scores, load_inputs_task, quarantine_record
from tasks.curate.kanon import canonical_patterns, drop_erased, k_anonymize, k_state_task
from tasks.curate.rows import Candidate, CuratedExample
from tasks.curate.summary import CurateResult, publish_curate, report_curate, window_result
from tasks.datasets import Quarantine, training_exclusions
from tasks.feedback import clear_stale, mark_stale, stale_windows_task
from tasks.pii.engine import PiiConfig
from tasks.review import queue_for_review

# Traces per anonymisation task, in spaCy batches (512 at the default batch size): the unit
# the task runner (FLYWHEEL_TASK_RUNNER: threads, dask, ray) spreads out.
CHUNK_BATCHES = 8


@described
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
    the run says how many and why. Every run plants synthetic canary records (fresh people
    and identifiers, English and Korean) in its batch: if one of their values survives
    anonymisation (below FLYWHEEL_CURATE__CANARY_MIN_RECALL), the run commits nothing, fails
    with the types that leaked, and the window is curated again by the next run.

    Args:
        window_start: The hour to curate, on the hour in UTC (e.g. 2026-11-22T10:00:00Z), as
            collect and score wrote it. Empty: the last closed hour.
    """
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
        examples, broken, canary = _anonymize(rt, report, gated.kept, windows=[*stale, window])
        bad = [quarantine_record(r, "no score row for this trace") for r in unscored] + broken
        with erasure_lease(rt.store, rt.settings).shared():  # no erasure from read to write
            result, queued = _commit(
                rt,
                report,
                window,
                gated,
                examples,
                rows=[*rows, *unscored],
                quarantined=bad,
                opted_out=opted_out,
                canary=canary,
                read=rollouts.num_rows,
            )
    publish_curate(result, queued=queued)
    result.recurated = _recurate(rt, stale)
    return result


def _commit(
    rt: Runtime,
    report: StageReport,
    window: str,
    gated: Gated,
    examples: list[CuratedExample],
    *,
    rows: Sequence[Mapping[str, Any]],
    quarantined: list[Quarantine],
    opted_out: set[str],
    canary: dict[str, Any] | None,
    read: int,
) -> tuple[CurateResult, int]:
    """k-anonymity and every write of the window (held rows, the table, quarantine, review
    queue, audit), run under the erasure lease: a forget-user waits for them, and one that
    ran since the gates read consent (``opted_out``) has tombstoned its user, whose rows
    (``rows``: the window's rollouts) are left out here. Returns the result and how many
    rows were queued for review."""
    cfg, gates_read = rt.settings.curate, opted_out
    opted_out = training_exclusions(rt.catalog, mode=rt.settings.consent_mode)  # read again
    examples, bad = drop_erased(
        examples, quarantined, rows=rows, excluded=opted_out, before=gates_read
    )
    state = k_state_task(rt.catalog, rt.store, window=window, opted_out=opted_out)
    if cfg.pattern_grouping == "embedding":  # paraphrases share a pattern
        examples = canonical_patterns(examples, state, threshold=cfg.paraphrase_threshold)
    decision = k_anonymize(
        examples, pending=state.pending, table_members=state.members, k=cfg.k_anonymity
    )
    done = Curation(window, gated, decision, state, bad, opted_out, canary)
    snapshot, per_trace = commit_window(rt, done)
    review = queue_for_review(rt, report, window=window, rows=decision.release)
    pii = count_entities(examples)
    audit_window(rt, done, pii=pii, per_trace=per_trace)
    result = window_result(done, read=read, pii=pii, snapshot_id=snapshot)
    result.coverage = _coverage(rt, report, window, examples, decision.release)
    report_curate(report, result)
    return result, len(review)


def _coverage(
    rt: Runtime,
    report: StageReport,
    window: str,
    examples: list[CuratedExample],
    release: list[CuratedExample],
) -> dict[str, dict[str, Any]]:
    """How much of the window's prompts each workload's golden set covers
    (:mod:`tasks.golden_coverage`), its gauges, and the run's line per workload."""
    from tasks import golden_coverage

    measured = golden_coverage.measure_window(
        rt.store,
        rt.settings.reward,
        rt.settings.curate,
        window=window,
        examples=examples,
        released={str(r["trace_id"]) for r in release},
        workloads=rt.settings.workloads,
    )
    for cov in measured:
        golden_coverage.report(report, cov)
        get_run_logger().info("curate %s: %s", window, cov.line())
    return {cov.workload: cov.as_dict() for cov in measured}


def _anonymize(
    rt: Runtime, report: StageReport, rows: list[Candidate], *, windows: list[str]
) -> tuple[list[CuratedExample], list[Quarantine], dict[str, Any] | None]:
    """Remove personal data from ``rows`` and the run's canaries in chunks the task runner
    (FLYWHEEL_TASK_RUNNER: threads, dask, ray) spreads out, then check the canaries and take
    them out; returns the anonymised rows, the quarantined ones (in chunk order whichever
    worker ran them) and the canary check's audit details. Canaries that leak stop the run
    before anything is written (``windows``, this one last, are curated again next run)."""
    cfg = rt.settings.curate
    batch = plant_canaries(cfg, window=windows[-1])
    chunks = chunked([*rows, *batch.rows()], cfg.batch_size * CHUNK_BATCHES)
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
    broken = [q for _good, bad in parts for q in bad]
    if not batch.canaries:
        return examples, broken, None
    check, examples, broken = check_canaries(
        batch, examples, broken, min_recall=cfg.canary_min_recall
    )
    enforce_canaries(rt, report, check, windows=windows, rows=len(examples))
    return examples, broken, check.details()


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
            for left in windows[windows.index(w) :]:  # this one and those not reached yet
                mark_stale(rt.store, stage="curate", window=left)
            raise
        done.append(w)
    return done
