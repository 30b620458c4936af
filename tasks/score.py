"""Stage 2 logic: score every rollout of a window with the composite reward of
:mod:`tasks.reward`, cached, and write ``scores/window=<start>/scores.parquet``.

:class:`Scorer` is also the gate's entry point (``Scorer(settings).score(items)`` or
:func:`score_batch`): the same judge, ragas mode and weights in both places.

Cache: ``scores/cache/<namespace>/<h>.parquet``, 16 shards by the first hex digit ``h`` of the
content key (:func:`tasks.reward.content_key`: sha256 of namespace, question, contexts, answer,
reference). Rows hold the key and the three content-dependent components (NaN = computed, not
applicable); no text, so the cache holds no personal data. Failed components are not cached.
"""

from __future__ import annotations

import asyncio
import io
import logging
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.errors import JudgeError, ObjectNotFound, TransientStoreError
from infra.keys import cache_shard_key, scores_key
from infra.retries import retry_on
from tasks.datasets import SCORE_SCHEMA
from tasks.reward import (
    CACHED,
    COMPONENTS,
    ContextMetrics,
    Judge,
    RewardBreakdown,
    build_judge,
    cache_namespace,
    clamp,
    combine,
    content_key,
    feedback_component,
    latency_component,
    resolve_ragas_mode,
    reward_config_hash,
)

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterable, Sequence

    from infra.llm import ChatClient
    from infra.metrics import StageReport
    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)


@dataclass
class ScoreItem:
    """One answer to score: a trace in stage 2, a golden item's answer in the gate."""

    question: str
    contexts: list[str]
    answer: str
    reference: str | None = None
    feedback: int | None = None
    latency_s: float | None = None


@dataclass
class ScoreStats:
    """Counters of one scorer. ``judge_calls`` are judge invocations (verifier or LLM); the
    ``llm_*`` fields are HTTP attempts to the endpoint (judge and ragas together)."""

    items: int = 0
    cache_hits: int = 0  # items that needed no computation (cached, or repeated in the run)
    judge_calls: int = 0
    judge_failures: int = 0  # after retries: the judge component is missing for the item
    judge_skipped: int = 0  # feedback present and skip_when_feedback set
    judge_unverifiable: int = 0
    ragas_failures: int = 0
    llm_requests: int = 0
    llm_retries: int = 0
    llm_malformed: int = 0
    llm_budget_exhausted: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class ComponentCache:
    """Content-dependent components by content key (float, or NaN = not applicable)."""

    def __init__(self, entries: dict[str, dict[str, float]] | None = None) -> None:
        self.entries: dict[str, dict[str, float]] = entries or {}
        self.dirty: set[str] = set()

    def get(self, key: str) -> dict[str, float]:
        return self.entries.get(key, {})

    def update(self, key: str, values: dict[str, float]) -> None:
        if values:
            self.entries.setdefault(key, {}).update(values)
            self.dirty.add(key)


class Scorer:
    """Scores items with one judge and one ragas mode (both from settings unless given).

    Use :meth:`score` from sync code (it closes the HTTP pool when done), or :meth:`ascore`
    from async code followed by :meth:`aclose`. ``stats`` accumulates over calls; the LLM call
    budget is per scorer."""

    def __init__(
        self,
        settings: Settings,
        *,
        judge: Judge | None = None,
        ragas_mode: str | None = None,
        client: ChatClient | None = None,
    ) -> None:
        self.settings = settings
        self.ragas_mode = ragas_mode or resolve_ragas_mode(settings)
        wants_llm = self.ragas_mode == "llm" or (judge is None and settings.judge.kind == "llm")
        if client is None and wants_llm:
            from infra.llm import ChatClient

            client = ChatClient.from_settings(settings.judge)
        self.client = client
        self.judge = judge or build_judge(settings, client)
        self.metrics = ContextMetrics(self.ragas_mode, client)
        self.stats = ScoreStats()
        self.config_hash = reward_config_hash(
            settings, judge=self.judge.config_id, ragas_mode=self.ragas_mode
        )
        self.namespace = cache_namespace(self.judge.config_id, self.ragas_mode)

    def key(self, item: ScoreItem) -> str:
        return content_key(
            self.namespace, item.question, item.contexts, item.answer, item.reference
        )

    def score(
        self, items: Sequence[ScoreItem], cache: ComponentCache | None = None
    ) -> list[RewardBreakdown]:
        """Sync :meth:`ascore` (also safe under a running event loop)."""

        async def run() -> list[RewardBreakdown]:
            try:
                return await self.ascore(items, cache)
            finally:
                await self.aclose()

        return run_sync(run())

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()

    async def ascore(
        self, items: Sequence[ScoreItem], cache: ComponentCache | None = None
    ) -> list[RewardBreakdown]:
        """One breakdown per item, in order. Judge failures make components missing; they
        never raise. Each distinct content is computed once, and not at all when cached."""
        cache = cache if cache is not None else ComponentCache()
        keys = [self.key(item) for item in items]
        skips = [self._skips(item) for item in items]
        todo: dict[str, set[str]] = {}
        first: dict[str, ScoreItem] = {}
        for item, key, skip in zip(items, keys, skips, strict=True):
            need = set(CACHED) - ({"judge"} if skip else set())
            new = need - cache.get(key).keys() - todo.get(key, set())
            if new:
                todo.setdefault(key, set()).update(new)
                first.setdefault(key, item)
            else:
                self.stats.cache_hits += 1
        done = await self._gather([self._compute(first[k], todo[k]) for k in todo])
        for key, values in zip(todo, done, strict=True):
            cache.update(key, values)
        self._copy_client_stats()
        self.stats.items += len(items)
        return [
            self._breakdown(item, cache.get(key), skip)
            for item, key, skip in zip(items, keys, skips, strict=True)
        ]

    def _skips(self, item: ScoreItem) -> bool:
        skip = bool(
            self.settings.judge.skip_when_feedback
            and self.judge.costly
            and item.feedback is not None
        )
        self.stats.judge_skipped += int(skip)
        return skip

    def _breakdown(self, item: ScoreItem, cached: dict[str, float], skip: bool) -> RewardBreakdown:
        r = self.settings.reward
        comps: dict[str, float | None] = {c: cached.get(c) for c in CACHED}
        if skip:  # even when cached: a trace's reward must not depend on its neighbours
            comps["judge"] = None
        comps["feedback"] = feedback_component(item.feedback, r.feedback_none)
        comps["latency"] = latency_component(item.latency_s, r.latency_ok_s, r.latency_max_s)
        return combine(comps, r)

    async def _compute(self, item: ScoreItem, which: set[str]) -> dict[str, float]:
        """The components in ``which`` that could be computed (NaN = not applicable)."""
        reference = item.reference or self.judge.reference_for(item.question, item.contexts)
        jobs: dict[str, Coroutine[Any, Any, float | None]] = {}
        if "judge" in which:
            self.stats.judge_calls += 1
            jobs["judge"] = self.judge.judge(
                question=item.question, contexts=item.contexts, answer=item.answer,
                reference=reference,
            )  # fmt: skip
        if "faithfulness" in which:
            jobs["faithfulness"] = self.metrics.faithfulness(
                item.question, item.contexts, item.answer
            )
        if "context_recall" in which:
            jobs["context_recall"] = self.metrics.context_recall(
                item.question, item.contexts, reference
            )
        results = await self._gather(list(jobs.values()), return_exceptions=True)
        values: dict[str, float] = {}
        for name, result in zip(jobs, results, strict=True):
            if isinstance(result, BaseException):
                self._failed(name, result)
            elif result is None:
                self.stats.judge_unverifiable += int(name == "judge")
                values[name] = math.nan
            else:
                values[name] = clamp(float(result))
        return values

    async def _gather(
        self, coros: list[Coroutine[Any, Any, Any]], return_exceptions: bool = False
    ) -> list[Any]:
        """Concurrently when an LLM endpoint is involved; else in turn, since the work is pure
        CPU and an asyncio task per component cost more than the component (measured)."""
        if self.client is not None:
            return list(await asyncio.gather(*coros, return_exceptions=return_exceptions))
        results: list[Any] = []
        for coro in coros:
            try:
                results.append(await coro)
            except Exception as exc:  # noqa: BLE001 - same contract as gather(return_exceptions)
                if not return_exceptions:
                    raise
                results.append(exc)
        return results

    def _failed(self, name: str, exc: BaseException) -> None:
        if not isinstance(exc, Exception):
            raise exc  # cancellation and interrupts are not judge failures
        if name == "judge":
            self.stats.judge_failures += 1
        else:
            self.stats.ragas_failures += 1
        # a judge must never fail the window; unexpected errors are logged louder
        level = logging.INFO if isinstance(exc, JudgeError) else logging.WARNING
        log.log(level, "%s component missing: %s", name, type(exc).__name__)

    def _copy_client_stats(self) -> None:
        if self.client is not None:
            s = self.client.stats
            self.stats.llm_requests, self.stats.llm_retries = s.requests, s.retries
            self.stats.llm_malformed = s.malformed
            self.stats.llm_budget_exhausted = s.budget_exhausted


def score_batch(
    items: Sequence[ScoreItem],
    judge: Judge | None = None,
    settings: Settings | None = None,
    *,
    ragas_mode: str | None = None,
    cache: ComponentCache | None = None,
) -> list[RewardBreakdown]:
    """Score ``items`` with the judge and ragas mode of ``settings`` unless given."""
    return Scorer(_settings(settings), judge=judge, ragas_mode=ragas_mode).score(items, cache)


async def ascore_batch(
    items: Sequence[ScoreItem],
    judge: Judge | None = None,
    settings: Settings | None = None,
    *,
    ragas_mode: str | None = None,
    cache: ComponentCache | None = None,
) -> list[RewardBreakdown]:
    """Async :func:`score_batch`."""
    scorer = Scorer(_settings(settings), judge=judge, ragas_mode=ragas_mode)
    try:
        return await scorer.ascore(items, cache)
    finally:
        await scorer.aclose()


def score_answer(
    *,
    question: str,
    contexts: list[str],
    answer: str,
    reference: str | None = None,
    feedback: int | None = None,
    latency_s: float | None = None,
    judge: Judge | None = None,
    settings: Settings | None = None,
    ragas_mode: str | None = None,
) -> RewardBreakdown:
    """The reward of one answer (use :class:`Scorer` or :func:`score_batch` for many)."""
    item = ScoreItem(question, list(contexts), answer, reference, feedback, latency_s)
    return score_batch([item], judge, settings, ragas_mode=ragas_mode)[0]


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` from sync code, in a helper thread when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _settings(settings: Settings | None) -> Settings:
    if settings is not None:
        return settings
    from infra.settings import get_settings

    return get_settings()


# ---- stage 2: windows, cache and scores tables --------------------------------------------

CACHE_SCHEMA = pa.schema([("key", pa.string()), *[(c, pa.float64()) for c in CACHED]])
TRANSIENT = (TransientStoreError,)


@dataclass
class ScoreResult:
    """What one score run did (no personal data)."""

    window: str
    status: str  # "scored" | "no_rollouts"
    message: str
    windows: list[str]
    traces: int = 0
    reward_mean: float | None = None
    missing: dict[str, int] = field(default_factory=dict)
    judge_kind: str = ""
    ragas_mode: str = ""
    reward_config_hash: str = ""
    stats: dict[str, int] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)


def items_from_rollouts(rollouts: pa.Table) -> list[ScoreItem]:
    """The score items of a rollouts batch (:func:`tasks.collect.read_rollouts`), in order."""
    cols = {n: rollouts.column(n).to_pylist() for n in ("question", "contexts", "answer")}
    feedback = rollouts.column("feedback").to_pylist()
    latency = rollouts.column("latency_s").to_pylist()
    return [
        ScoreItem(q or "", list(c or []), a or "", None, f, lat)
        for q, c, a, f, lat in zip(
            cols["question"], cols["contexts"], cols["answer"], feedback, latency, strict=True
        )
    ]


def scores_table(
    rollouts: pa.Table, rewards: list[RewardBreakdown], scorer: Scorer, window: str
) -> pa.Table:
    """The scores of a window: one row per rollout, ``SCORE_SCHEMA``."""
    rows = [r.as_row() for r in rewards]
    data: dict[str, list[Any]] = {
        "trace_id": rollouts.column("trace_id").to_pylist(),
        "prompt_group": rollouts.column("prompt_group").to_pylist(),
        "model_version": rollouts.column("model_version").to_pylist(),
    }
    for name in ("reward", *[f"reward_{c}" for c in COMPONENTS], "missing"):
        data[name] = [row[name] for row in rows]
    n = len(rows)
    data["reward_config_hash"] = [scorer.config_hash] * n
    data["judge_kind"] = [scorer.judge.kind] * n
    data["ragas_mode"] = [scorer.ragas_mode] * n
    data["window"] = [window] * n
    return pa.Table.from_pydict(data, schema=SCORE_SCHEMA)


def load_cache(store: ObjectStore, namespace: str, keys: Iterable[str]) -> ComponentCache:
    """The cache shards that hold ``keys`` (each shard read whole, so saving keeps it whole)."""
    entries: dict[str, dict[str, float]] = {}
    for shard in sorted({k[0] for k in keys}):
        try:
            table = pq.read_table(io.BytesIO(store.get(cache_shard_key(namespace, shard))))
        except ObjectNotFound:
            continue
        columns = {c: table.column(c).to_pylist() for c in CACHED}
        for i, key in enumerate(table.column("key").to_pylist()):
            entries[key] = {c: columns[c][i] for c in CACHED if columns[c][i] is not None}
    return ComponentCache(entries)


def save_cache(store: ObjectStore, namespace: str, cache: ComponentCache) -> int:
    """Rewrite the shards that gained entries; returns how many shards were written."""
    shards = sorted({k[0] for k in cache.dirty})
    for shard in shards:
        keys = sorted(k for k in cache.entries if k[0] == shard)
        data: dict[str, list[Any]] = {"key": keys}
        for c in CACHED:
            data[c] = [cache.entries[k].get(c) for k in keys]
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pydict(data, schema=CACHE_SCHEMA), sink)
        store.put(cache_shard_key(namespace, shard), sink.getvalue())
    cache.dirty.clear()
    return len(shards)


def summarize_run(
    windows: list[str], scored: dict[str, pa.Table], scorer: Scorer, keys: list[str]
) -> ScoreResult:
    """The run's result: counts, reward mean, missing components (no personal data)."""
    missing = [w for w in windows if w not in scored]
    traces = sum(t.num_rows for t in scored.values())
    rewards = [r for t in scored.values() for r in t.column("reward").to_pylist()]
    if scored:
        message = f"scored {traces} traces in {len(scored)} window(s)"
        if missing:
            message += f"; no rollouts for window {', '.join(missing)}"
    else:
        message = f"no rollouts for window {', '.join(windows)}"
    return ScoreResult(
        window=windows[0],
        status="scored" if scored else "no_rollouts",
        message=message,
        windows=list(scored),
        traces=traces,
        reward_mean=sum(rewards) / len(rewards) if rewards else None,
        missing=missing_counts(pa.concat_tables(scored.values())) if scored else {},
        judge_kind=scorer.judge.kind,
        ragas_mode=scorer.ragas_mode,
        reward_config_hash=scorer.config_hash,
        stats=scorer.stats.as_dict(),
        keys=keys,
    )


def missing_counts(scores: pa.Table) -> dict[str, int]:
    """How many traces lacked each component."""
    counts = dict.fromkeys(COMPONENTS, 0)
    for missing in scores.column("missing").to_pylist():
        for c in missing or []:
            counts[c] += 1
    return counts


def report_metrics(
    report: StageReport, tables: list[pa.Table], stats: ScoreStats, judge_kind: str
) -> None:
    """The stage's reward histograms and judge counters (``flywheel_reward{component}``...)."""
    scores = pa.concat_tables(tables) if tables else SCORE_SCHEMA.empty_table()
    report.observe("flywheel_reward", scores.column("reward").to_pylist(), component="total")
    for c in COMPONENTS:
        values = [v for v in scores.column(f"reward_{c}").to_pylist() if v is not None]
        report.observe("flywheel_reward", values, component=c)
    for c, n in missing_counts(scores).items():
        report.count("flywheel_reward_missing_total", n, component=c)
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
        "| component | present | missing | mean | p10 | p50 | p90 |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in ("reward", *[f"reward_{c}" for c in COMPONENTS]):
        values = sorted(v for v in table.column(c).to_pylist() if v is not None)
        if values:
            q = [values[min(len(values) - 1, int(p * len(values)))] for p in (0.1, 0.5, 0.9)]
            stats = f"{sum(values) / len(values):.3f} | {q[0]:.3f} | {q[1]:.3f} | {q[2]:.3f}"
        else:
            stats = "- | - | - | -"
        lines.append(
            f"| {c.removeprefix('reward_')} | {len(values)} | {n - len(values)} ({(n - len(values)) / n:.0%}) | {stats} |"
        )
    s = result.stats
    lines += [
        "",
        f"judge calls {s.get('judge_calls', 0)}, cache hits {s.get('cache_hits', 0)}, "
        f"judge failures {s.get('judge_failures', 0)}, skipped for feedback "
        f"{s.get('judge_skipped', 0)}, LLM requests {s.get('llm_requests', 0)} "
        f"({s.get('llm_retries', 0)} retries, {s.get('llm_malformed', 0)} malformed).",
    ]
    return "\n".join(lines)


@task(
    retries=3,
    retry_delay_seconds=[2, 5, 15],
    retry_jitter_factor=0.5,
    cache_policy=NO_CACHE,
    retry_condition_fn=retry_on(*TRANSIENT),
)
def read_rollouts_task(store: ObjectStore, window: str) -> pa.Table | None:
    """Returns the window's rollouts, or None when stage 1 wrote none for it."""
    from tasks.datasets import read_rollouts

    try:
        return read_rollouts(store, window)
    except ObjectNotFound:
        return None


@task(
    retries=3,
    retry_delay_seconds=[2, 5, 15],
    retry_jitter_factor=0.5,
    cache_policy=NO_CACHE,
    retry_condition_fn=retry_on(*TRANSIENT),
)
def load_cache_task(store: ObjectStore, scorer: Scorer, rollouts: pa.Table) -> ComponentCache:
    """Returns the cached components for the window's contents."""
    return load_cache(
        store, scorer.namespace, (scorer.key(i) for i in items_from_rollouts(rollouts))
    )


@task(cache_policy=NO_CACHE)
def score_rollouts_task(
    scorer: Scorer, rollouts: pa.Table, cache: ComponentCache, window: str
) -> pa.Table:
    """Returns the window's scores table (judge retries happen inside, per call)."""
    rewards = scorer.score(items_from_rollouts(rollouts), cache)
    return scores_table(rollouts, rewards, scorer, window)


@task(
    retries=3,
    retry_delay_seconds=[2, 5, 15],
    retry_jitter_factor=0.5,
    cache_policy=NO_CACHE,
    retry_condition_fn=retry_on(*TRANSIENT),
)
def write_scores_task(store: ObjectStore, window: str, scores: pa.Table) -> str:
    """Returns the key of the scores written (atomically, replacing a previous run)."""
    sink = io.BytesIO()
    pq.write_table(scores, sink)
    key = scores_key(window)
    store.put(key, sink.getvalue())
    return key


@task(
    retries=3,
    retry_delay_seconds=[2, 5, 15],
    retry_jitter_factor=0.5,
    cache_policy=NO_CACHE,
    retry_condition_fn=retry_on(*TRANSIENT),
)
def save_cache_task(store: ObjectStore, namespace: str, cache: ComponentCache) -> int:
    """Returns how many cache shards were rewritten."""
    return save_cache(store, namespace, cache)
