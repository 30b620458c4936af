"""Stage 2 logic: score every rollout of a window with the composite reward of
:mod:`tasks.reward` (cached, see :mod:`tasks.reward.cache`), and write
``scores/window=<start>/scores.parquet`` (:func:`score_window`); the run's summary, metrics,
artifact and log line.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from infra.errors import ObjectNotFound
from infra.keys import scores_key
from infra.task_retries import IO_RETRIES
from tasks.datasets import (
    MODEL_VERSION,
    PROMPT_GROUP,
    REWARD,
    REWARD_COLUMNS,
    SCORE_SCHEMA,
    TRACE_ID,
    WORKLOAD,
    Score,
    read_rollouts,
)
from tasks.feedback import clear_stale, mark_stale
from tasks.monitors import report_gauges, window_monitors
from tasks.reward import (
    COMPONENTS,
    ComponentCache,
    RewardBreakdown,
    ScoreItem,
    Scorer,
    ScoreStats,
    load_cache,
    save_cache,
)
from tasks.reward.verifiers import DEFAULT_WORKLOAD
from tasks.score_chunks import score_items

if TYPE_CHECKING:
    from infra.metrics.stage import StageReport
    from infra.runtime import Runtime
    from infra.store import ObjectStore


@dataclass(kw_only=True)
class ScoreResult:
    """What one score run did (no personal data)."""

    window: str
    status: str  # "scored" | "no_rollouts"
    message: str
    windows: list[str]
    traces: int = 0
    reward_mean: float | None = None
    missing: dict[str, int] = field(default_factory=dict)
    not_applicable: dict[str, int] = field(default_factory=dict)
    ineligible: dict[str, int] = field(default_factory=dict)  # reason -> traces
    judge_kind: str = ""
    ragas_mode: str = ""
    reward_config_hash: str = ""
    stats: dict[str, int] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)


def items_from_rollouts(rollouts: pa.Table) -> list[ScoreItem]:
    """The score items of a rollouts batch (:func:`tasks.datasets.read_rollouts`), in order;
    a batch without a ``workload`` column is all ``"default"``."""
    cols = {n: rollouts.column(n).to_pylist() for n in ("question", "contexts", "answer")}
    feedback = rollouts.column("feedback").to_pylist()
    latency = rollouts.column("latency_s").to_pylist()
    ids = rollouts.column(TRACE_ID).to_pylist()
    n = rollouts.num_rows
    names = rollouts.column_names
    workloads = rollouts.column(WORKLOAD).to_pylist() if WORKLOAD in names else [None] * n
    return [
        ScoreItem(
            question=q or "",
            contexts=list(c or []),
            answer=a or "",
            feedback=f,
            latency_s=lat,
            workload=w or DEFAULT_WORKLOAD,
            trace_id=t,
        )
        for q, c, a, f, lat, w, t in zip(
            cols["question"],
            cols["contexts"],
            cols["answer"],
            feedback,
            latency,
            workloads,
            ids,
            strict=True,
        )
    ]


def scores_table(
    rollouts: pa.Table, rewards: list[RewardBreakdown], *, scorer: Scorer, window: str
) -> pa.Table:
    """The scores of a window: one row per rollout (:class:`~tasks.datasets.Score`),
    ``SCORE_SCHEMA``."""
    ids, groups, versions = (
        rollouts.column(c).to_pylist() for c in (TRACE_ID, PROMPT_GROUP, MODEL_VERSION)
    )
    rows = [
        Score(
            **reward.as_row(),
            trace_id=trace_id,
            prompt_group=group,
            model_version=version,
            reward_config_hash=scorer.config_hash,
            judge_kind=scorer.judge.kind,
            ragas_mode=scorer.ragas_mode,
            window=window,
        )
        for reward, trace_id, group, version in zip(rewards, ids, groups, versions, strict=True)
    ]
    return pa.Table.from_pylist(rows, schema=SCORE_SCHEMA)


def summarize_run(
    windows: list[str], scored: dict[str, pa.Table], *, scorer: Scorer, keys: list[str]
) -> ScoreResult:
    """The run's result: counts, reward mean, missing components (no personal data)."""
    missing = [w for w in windows if w not in scored]
    traces = sum(t.num_rows for t in scored.values())
    rewards = [r for t in scored.values() for r in t.column(REWARD).to_pylist()]
    if scored:
        message = f"scored {traces} traces in {len(scored)} window(s)"
        if missing:
            message += f"; no rollouts for window {', '.join(missing)}"
    else:
        message = f"no rollouts for window {', '.join(windows)}"
    ineligible = ineligible_counts(list(scored.values()))
    if ineligible:
        message += (
            f"; {sum(ineligible.values())} not training-eligible ("
            + "; ".join(f"{n}: {reason}" for reason, n in ineligible.items())
            + ")"
        )
    table = pa.concat_tables(scored.values()) if scored else None
    return ScoreResult(
        window=windows[0],
        status="scored" if scored else "no_rollouts",
        message=message,
        windows=list(scored),
        traces=traces,
        reward_mean=sum(rewards) / len(rewards) if rewards else None,
        missing=missing_counts(table) if table is not None else {},
        not_applicable=missing_counts(table, "not_applicable") if table is not None else {},
        ineligible=ineligible,
        judge_kind=scorer.judge.kind,
        ragas_mode=scorer.ragas_mode,
        reward_config_hash=scorer.config_hash,
        stats=scorer.stats.as_dict(),
        keys=keys,
    )


def missing_counts(scores: pa.Table, column: str = "missing") -> dict[str, int]:
    """How many traces lacked each component (``column="not_applicable"``: how many of those
    were computed and did not apply)."""
    counts = dict.fromkeys(COMPONENTS, 0)
    if column not in scores.column_names:
        return counts
    for missing in scores.column(column).to_pylist():
        for c in missing or []:
            counts[c] += 1
    return counts


def ineligible_counts(tables: list[pa.Table]) -> dict[str, int]:
    """Traces that are scored but not training-eligible, by reason (most frequent first)."""
    counts: dict[str, int] = {}
    for table in tables:
        if "ineligible_reason" not in table.column_names:
            continue
        for reason in table.column("ineligible_reason").to_pylist():
            if reason:
                counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def report_metrics(
    report: StageReport, tables: list[pa.Table], *, stats: ScoreStats, judge_kind: str
) -> None:
    """The stage's reward histograms and judge counters (``flywheel_reward{component}``...)."""
    scores = pa.concat_tables(tables) if tables else SCORE_SCHEMA.empty_table()
    report.observe("flywheel_reward", scores.column(REWARD).to_pylist(), component="total")
    for c in COMPONENTS:
        values = [v for v in scores.column(f"reward_{c}").to_pylist() if v is not None]
        report.observe("flywheel_reward", values, component=c)
    for c, n in missing_counts(scores).items():
        report.count("flywheel_reward_missing_total", n, component=c)
    for c, n in missing_counts(scores, "not_applicable").items():
        report.count("flywheel_reward_not_applicable_total", n, component=c)
    report.count("flywheel_reward_ineligible_total", stats.ineligible, judge=judge_kind)
    report.count("flywheel_judge_calls_total", stats.judge_calls, judge=judge_kind)
    report.count("flywheel_judge_failures_total", stats.judge_failures, judge=judge_kind)
    report.count("flywheel_judge_skipped_total", stats.judge_skipped, judge=judge_kind)
    report.count("flywheel_judge_cache_hits_total", stats.cache_hits)
    report.count("flywheel_judge_llm_requests_total", stats.llm_requests)
    report.count("flywheel_ragas_failures_total", stats.ragas_failures)


def summary_markdown(result: ScoreResult, scores: list[pa.Table]) -> str:
    """The run's artifact: reward distribution per component and how often each was missing."""
    lines = [
        f"# score {', '.join(result.windows) or result.window}",
        "",
        f"{result.message}. judge `{result.judge_kind}`, ragas `{result.ragas_mode}`, "
        f"reward config `{result.reward_config_hash}`.",
    ]
    if not scores or not sum(t.num_rows for t in scores):
        return "\n".join(lines)
    table = pa.concat_tables(scores)
    n = table.num_rows
    lines += [
        "",
        "| component | present | missing | not applicable | mean | p10 | p50 | p90 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    na = missing_counts(table, "not_applicable")
    for c in REWARD_COLUMNS:
        values = sorted(v for v in table.column(c).to_pylist() if v is not None)
        if values:
            q = [values[min(len(values) - 1, int(p * len(values)))] for p in (0.1, 0.5, 0.9)]
            stats = f"{sum(values) / len(values):.3f} | {q[0]:.3f} | {q[1]:.3f} | {q[2]:.3f}"
        else:
            stats = "- | - | - | -"
        lines.append(
            f"| {c.removeprefix('reward_')} | {len(values)} | {n - len(values)} "
            f"({(n - len(values)) / n:.0%}) | {na.get(c.removeprefix('reward_'), '-')} | {stats} |"
        )
    s = result.stats
    lines += [
        "",
        f"judge calls {s.get('judge_calls', 0)}, cache hits {s.get('cache_hits', 0)}, "
        f"judge failures {s.get('judge_failures', 0)}, skipped for feedback "
        f"{s.get('judge_skipped', 0)}, LLM requests {s.get('llm_requests', 0)} "
        f"({s.get('llm_retries', 0)} retries, {s.get('llm_malformed', 0)} malformed).",
    ]
    if result.ineligible:
        lines += ["", "| not training-eligible | traces |", "|---|---:|"]
        lines += [f"| {reason} | {k} |" for reason, k in result.ineligible.items()]
    return "\n".join(lines)


@task(**IO_RETRIES)
def read_rollouts_task(store: ObjectStore, window: str) -> pa.Table | None:
    """Returns the window's rollouts, or None when stage 1 wrote none for it."""
    try:
        return read_rollouts(store, window)
    except ObjectNotFound:
        return None


@task(**IO_RETRIES)
def load_cache_task(store: ObjectStore, *, scorer: Scorer, rollouts: pa.Table) -> ComponentCache:
    """Returns the cached components for the window's contents."""
    keys = (scorer.key(i) for i in items_from_rollouts(rollouts))
    return load_cache(store, namespace=scorer.namespace, keys=keys)


@task(**IO_RETRIES)
def write_scores_task(store: ObjectStore, *, window: str, scores: pa.Table) -> str:
    """Returns the key of the scores written (atomically, replacing a previous run)."""
    sink = io.BytesIO()
    pq.write_table(scores, sink)
    key = scores_key(window)
    store.put(key, sink.getvalue())
    return key


@task(**IO_RETRIES)
def save_cache_task(store: ObjectStore, *, namespace: str, cache: ComponentCache) -> int:
    """Returns how many cache shards were rewritten."""
    return save_cache(store, namespace=namespace, cache=cache)


def score_window(
    rt: Runtime, runner: Any, scorer: Scorer, report: StageReport, window: str, *, stale: bool
) -> tuple[str, pa.Table] | None:
    """Score every rollout of ``window`` on ``runner`` (an entered Prefect task runner) with
    the cached components reused, write its scores and the cache, count it in ``report``, and
    when it was ``stale`` (late feedback) hand it on to curate; returns the key written and the
    scores (None: the window has no rollouts, nothing to redo)."""
    rollouts = read_rollouts_task(rt.store, window)
    if rollouts is None:
        get_run_logger().warning("no rollouts for window %s (run collect first)", window)
        clear_stale(rt.store, stage="score", window=window)  # gone: nothing to redo
        return None
    cache = load_cache_task(rt.store, scorer=scorer, rollouts=rollouts)
    rewards = score_items(runner, scorer=scorer, items=items_from_rollouts(rollouts), cache=cache)
    scores = scores_table(rollouts, rewards, scorer=scorer, window=window)
    key = write_scores_task(rt.store, window=window, scores=scores)
    save_cache_task(rt.store, namespace=scorer.namespace, cache=cache)
    if stale:
        mark_stale(rt.store, stage="curate", window=window)
        clear_stale(rt.store, stage="score", window=window)
    report.records("in", rollouts.num_rows)
    report.records("out", scores.num_rows)
    report_gauges(report, window_monitors(rollouts, scores))
    return key, scores


def publish_score(result: ScoreResult, scores: list[pa.Table], *, window: str) -> None:
    """The run's ``score-summary`` artifact (named by its first ``window``) and its log line."""
    create_markdown_artifact(
        key="score-summary",
        markdown=summary_markdown(result, scores),
        description=f"score {window}",
    )
    get_run_logger().info("score %s: %s", window, result.message)
