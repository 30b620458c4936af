"""Stage 3 flow: ``curate``."""

from __future__ import annotations

from datetime import datetime

from prefect import flow, get_run_logger

from infra.errors import ObjectNotFound
from infra.flow_docs import described
from infra.keys import parse_window_start, window_id
from infra.lease import erasure_lease
from infra.runtime import Runtime
from tasks.curate.dedup import seen_before_task
from tasks.curate.gates import apply_gates, join_scores, load_inputs_task, quarantine_record
from tasks.curate.steps import Anonymised, anonymize_window, commit_curation
from tasks.curate.summary import CurateResult, publish_curate
from tasks.datasets import training_exclusions
from tasks.feedback import clear_stale, mark_stale, stale_windows_task


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
        examples, broken, canary = anonymize_window(
            rt, report, gated.kept, windows=[*stale, window]
        )
        bad = [quarantine_record(r, "no score row for this trace") for r in unscored] + broken
        anonymised = Anonymised(examples, bad, canary)
        with erasure_lease(rt.store, rt.settings).shared():  # no erasure from read to write
            result, queued = commit_curation(
                rt,
                report,
                window,
                gated,
                anonymised,
                rows=[*rows, *unscored],
                opted_out=opted_out,
                read=rollouts.num_rows,
            )
    publish_curate(result, queued=queued)
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
            for left in windows[windows.index(w) :]:  # this one and those not reached yet
                mark_stale(rt.store, stage="curate", window=left)
            raise
        done.append(w)
    return done
