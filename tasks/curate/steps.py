"""The steps of one ``curate`` flow run (flows/curate.py): the window's rows anonymised in
chunks the task runner spreads out, with the run's canaries checked; then, under the
erasure lease, k-anonymity and every write of the window, with its golden-set coverage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prefect import get_run_logger, unmapped

from infra.metrics.stage import StageReport
from infra.runners import task_runner
from infra.runtime import Runtime
from tasks.curate.anonymize import anonymize_task, chunked, count_entities
from tasks.curate.canaries import plant_canaries
from tasks.curate.canary_check import check_canaries, enforce_canaries
from tasks.curate.commit import Curation, audit_window, commit_window
from tasks.curate.gates import Gated
from tasks.curate.kanon import canonical_patterns, drop_erased, k_anonymize, k_state_task
from tasks.curate.rows import Candidate, CuratedExample
from tasks.curate.summary import CurateResult, report_curate, window_result
from tasks.datasets import Quarantine, Rollout, training_exclusions
from tasks.pii.engine import PiiConfig
from tasks.review import queue_for_review

# Traces per anonymisation task, in spaCy batches (512 at the default batch size): the unit
# the task runner (FLYWHEEL_TASK_RUNNER: threads, dask, ray) spreads out.
CHUNK_BATCHES = 8


@dataclass(frozen=True)
class Anonymised:
    """The window's rows after :func:`anonymize_window`: the anonymised ``examples``, every
    row ``quarantined`` so far, and the canary check's audit details (None: no canaries)."""

    examples: list[CuratedExample]
    quarantined: list[Quarantine]
    canary: dict[str, Any] | None


def anonymize_window(
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


def commit_curation(
    rt: Runtime,
    report: StageReport,
    window: str,
    gated: Gated,
    anonymised: Anonymised,
    *,
    rows: Sequence[Rollout],
    opted_out: set[str],
    read: int,
) -> tuple[CurateResult, int]:
    """k-anonymity and every write of the window (held rows, the table, quarantine, review
    queue, audit), run under the erasure lease: a forget-user waits for them, and one that
    ran since the gates read consent (``opted_out``) has tombstoned its user, whose rows
    (``rows``: the window's rollouts) are left out here. Returns the result and how many
    rows were queued for review."""
    cfg, gates_read = rt.settings.curate, opted_out
    examples, quarantined, canary = anonymised.examples, anonymised.quarantined, anonymised.canary
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
    result.coverage = golden_coverage_of(rt, report, window, examples, decision.release)
    report_curate(report, result)
    return result, len(review)


def golden_coverage_of(
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
