"""Stage 2 flow: ``score``."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from infra.keys import parse_window_start, window_id
from infra.parameters import Hours
from infra.runners import task_runner
from infra.runtime import Runtime
from tasks.feedback import clear_stale, mark_stale, stale_windows_task
from tasks.monitors import report_gauges, window_monitors
from tasks.reward import Scorer
from tasks.score import (
    ScoreResult,
    items_from_rollouts,
    load_cache_task,
    read_rollouts_task,
    report_metrics,
    save_cache_task,
    scores_table,
    summarize_run,
    summary_markdown,
    write_scores_task,
)
from tasks.score_chunks import score_items


@flow(name="score", log_prints=False)
def score(window_start: datetime | None = None, hours: Hours = 1) -> ScoreResult:
    """Score rollouts: give every trace of the window (default: the last closed hour; with
    hours > 1, each hourly window from window_start) a composite reward of judge, ragas
    faithfulness and context recall, user feedback and latency, and write
    scores/window=<start>/scores.parquet. Cached judge verdicts are reused, so rerunning a
    window costs no judge calls; a judge failure marks that component missing, never the run.
    A trace missing a component that reward.required asks for (default: a judge or verifier
    verdict, or user feedback) is scored but not training-eligible. Earlier windows whose
    feedback changed since they were scored (late feedback) are rescored too.

    Args:
        window_start: First hour to score, on the hour in UTC (e.g. 2026-11-22T10:00:00Z),
            as collect wrote it. Empty: the last closed hour.
        hours: How many hourly windows from window_start to score, each on its own (1 to 168).
    """
    logger = get_run_logger()
    rt = Runtime.from_env()
    start = parse_window_start(window_start)
    windows = [window_id(start + timedelta(hours=i)) for i in range(max(1, hours))]
    stale = stale_windows_task(rt.store, stage="score")  # late feedback changed them
    windows += [w for w in stale if w not in windows]
    scored: dict[str, pa.Table] = {}  # judge calls and ragas run on FLYWHEEL_TASK_RUNNER
    keys: list[str] = []
    with rt.reporting("score") as report:
        scorer = Scorer(rt.settings)
        with task_runner(rt.settings) as runner:  # a temporary cluster lives only this long
            for window in windows:
                rollouts = read_rollouts_task(rt.store, window)
                if rollouts is None:
                    logger.warning("no rollouts for window %s (run collect first)", window)
                    clear_stale(rt.store, stage="score", window=window)  # gone: nothing to redo
                    continue
                cache = load_cache_task(rt.store, scorer=scorer, rollouts=rollouts)
                rewards = score_items(
                    runner, scorer=scorer, items=items_from_rollouts(rollouts), cache=cache
                )
                scores = scores_table(rollouts, rewards, scorer=scorer, window=window)
                keys.append(write_scores_task(rt.store, window=window, scores=scores))
                save_cache_task(rt.store, namespace=scorer.namespace, cache=cache)
                if window in stale:
                    mark_stale(rt.store, stage="curate", window=window)
                    clear_stale(rt.store, stage="score", window=window)
                report.records("in", rollouts.num_rows)
                report.records("out", scores.num_rows)
                report_gauges(report, window_monitors(rollouts, scores))
                scored[window] = scores
        result = summarize_run(windows, scored, scorer=scorer, keys=keys)
        report_metrics(
            report, list(scored.values()), stats=scorer.stats, judge_kind=scorer.judge.kind
        )
    create_markdown_artifact(
        key="score-summary",
        markdown=summary_markdown(result, list(scored.values())),
        description=f"score {windows[0]}",
    )
    logger.info("score %s: %s", windows[0], result.message)
    return result
