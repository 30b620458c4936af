"""Stage 2 flow: ``score``."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
from prefect import flow

from infra.flow_docs import described
from infra.keys import parse_window_start, window_id
from infra.lease import erasure_lease
from infra.parameters import Hours
from infra.runners import task_runner
from infra.runtime import Runtime
from tasks.feedback import stale_windows_task
from tasks.reward import Scorer
from tasks.score import ScoreResult, publish_score, report_metrics, score_window, summarize_run


@described
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
            lease = erasure_lease(rt.store, rt.settings)  # no forget-user from read to write
            for window in windows:
                with lease.shared():
                    done = score_window(rt, runner, scorer, report, window, stale=window in stale)
                if done is not None:
                    keys.append(done[0])
                    scored[window] = done[1]
        result = summarize_run(windows, scored, scorer=scorer, keys=keys)
        report_metrics(
            report, list(scored.values()), stats=scorer.stats, judge_kind=scorer.judge.kind
        )
    publish_score(result, list(scored.values()), window=windows[0])
    return result
