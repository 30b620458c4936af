"""Stage 3 flow: ``curate``."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from prefect import flow, get_run_logger, unmapped
from prefect.artifacts import create_markdown_artifact

from infra.keys import parse_window_start, window_id
from infra.metrics import StageReport
from infra.runners import task_runner
from infra.runtime import Runtime
from tasks.curate import (
    CurateResult,
    KDecision,
    anonymize_task,
    apply_gates,
    audit_events,
    audit_task,
    chunked,
    commit_task,
    count_entities,
    held_task,
    join_scores,
    k_anonymize,
    k_state_task,
    load_inputs_task,
    quarantine_record,
)
from tasks.datasets import opted_out_keys, replace_quarantine_task
from tasks.pii import PiiConfig

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
    window replaces it. Runs on the window collect and score wrote (default: last closed hour).
    """
    logger = get_run_logger()
    rt = Runtime.from_env()
    cfg = rt.settings.curate
    window = window_id(parse_window_start(window_start))
    with rt.reporting("curate") as report:
        rollouts, scores = load_inputs_task(rt.store, window)
        rows, unscored = join_scores(rollouts, scores)
        opted_out = opted_out_keys(rt.catalog)  # re-checked now: consent may change after collect
        gated = apply_gates(rows, cfg, opted_out)
        chunks = chunked(gated.kept, cfg.batch_size * CHUNK_BATCHES)
        config = PiiConfig.from_settings(cfg)  # plain data: each worker loads its own engine
        with task_runner(rt.settings) as runner:  # a temporary cluster lives only this long
            futures = runner.map(anonymize_task, {"rows": chunks, "config": unmapped(config)})
            parts = futures.result()  # in chunk order, whichever worker ran them
        examples = [row for good, _bad in parts for row in good]
        bad = [quarantine_record(r, "no score row for this trace") for r in unscored]
        bad += [q for _good, broken in parts for q in broken]
        state = k_state_task(rt.catalog, rt.store, window, opted_out)
        decision = k_anonymize(examples, state.pending, state.members, cfg.k_anonymity)
        snapshot = commit_task(
            rt.catalog, window, decision.release, decision.released_ids, opted_out
        )
        in_table = state.in_table | set(decision.released_ids)
        held_task(rt.store, window, decision.hold, in_table, opted_out)
        replace_quarantine_task(rt.catalog, stage="curate", window=window, rows=bad)
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
        result = _result(window, rollouts.num_rows, decision, gated.dropped, pii, len(bad))
        result.snapshot_id, result.withdrawn = snapshot, state.withdrawn
        _report(report, result)
    create_markdown_artifact(
        key="curate-summary", markdown=summary_markdown(result), description=f"curate {window}"
    )
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
    return result


def _result(
    window: str,
    read: int,
    decision: KDecision,
    dropped: Counter[str],
    pii: Counter[str],
    quarantined: int,
) -> CurateResult:
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
        snapshot_id=None,
    )


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
    lines += ["", "| PII entity type | removed |", "|---|---:|"]
    lines += [f"| {etype} | {n} |" for etype, n in result.pii_entities.items()] or ["| none | 0 |"]
    lines += [
        "",
        f"Snapshot of flywheel.training_examples: `{result.snapshot_id}`. Held-back rows wait "
        "in `curate/held/` until their question pattern has k distinct users.",
    ]
    return "\n".join(lines)
