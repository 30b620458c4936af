"""Scoring spread over the configured task runner (``FLYWHEEL_TASK_RUNNER``: threads, Dask,
Ray): a window's items are cut into chunks, each chunk is scored by its own
:class:`~tasks.reward.Scorer` built from the settings in whichever worker runs it (judge calls
and ragas included), and the results come back in item order with the cache entries the
chunk computed and its counters, which the flow merges into its own scorer and cache.

Identical items (same content key) always land in the same chunk, so an item repeated in a
window is computed once, as on one scorer; the table written is the one a single scorer
writes. The judge's LLM call budget (``FLYWHEEL_JUDGE__CALL_BUDGET``) applies per chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from prefect import task, unmapped
from prefect.cache_policies import NO_CACHE

from tasks.reward import ComponentCache, RewardBreakdown, ScoreItem, Scorer, ScoreStats

if TYPE_CHECKING:
    from infra.settings import Settings

CHUNK_ITEMS = 256  # items per scoring task: the unit the task runner spreads out


@dataclass
class ChunkScores:
    """What one chunk gives back: rewards in its item order, the cache entries it computed,
    its scorer's counters."""

    rewards: list[RewardBreakdown]
    computed: dict[str, dict[str, float]]
    stats: ScoreStats


class Sealed:
    """The settings as one opaque value: Prefect walks task parameters that are collections,
    pydantic models included, and the settings' models are not meant to be walked."""

    __slots__ = ("settings",)

    def __init__(self, settings: Settings) -> None:
        self.settings = settings


def plan_chunks(keys: Sequence[str], size: int | None = None) -> list[list[int]]:
    """Item indices per chunk (``size`` items, default ``CHUNK_ITEMS``), in order; all items
    of one key in one chunk."""
    size = size or CHUNK_ITEMS
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    chunks: list[list[int]] = [[]]
    for members in groups.values():
        if chunks[-1] and len(chunks[-1]) + len(members) > size:
            chunks.append([])
        chunks[-1].extend(members)
    return [c for c in chunks if c]


def score_chunk(
    settings: Settings, items: list[ScoreItem], cached: dict[str, dict[str, float]]
) -> ChunkScores:
    """Score one chunk with a scorer of its own (the worker's)."""
    scorer = Scorer(settings)
    cache = ComponentCache({k: dict(v) for k, v in cached.items()})
    rewards = scorer.score(items, cache)
    return ChunkScores(
        rewards=rewards,
        computed={k: cache.entries[k] for k in cache.dirty},
        stats=scorer.stats,
    )


@task(cache_policy=NO_CACHE)
def score_chunk_task(
    sealed: Sealed, items: list[ScoreItem], cached: dict[str, dict[str, float]]
) -> ChunkScores:
    """Returns one chunk's rewards, computed cache entries and counters."""
    return score_chunk(sealed.settings, items, cached)


def score_items(
    runner: Any,
    *,
    scorer: Scorer,
    items: list[ScoreItem],
    cache: ComponentCache,
    task_fn: Callable[..., Any] = score_chunk_task,
) -> list[RewardBreakdown]:
    """Score ``items`` on ``runner`` (an entered Prefect task runner); merges the computed
    cache entries into ``cache`` and the counters into ``scorer.stats``; rewards in order."""
    keys = [scorer.key(item) for item in items]
    chunks = plan_chunks(keys)
    if not chunks:
        return []
    chunk_items = [[items[i] for i in chunk] for chunk in chunks]
    cached = [
        {keys[i]: cache.get(keys[i]) for i in chunk if cache.get(keys[i])} for chunk in chunks
    ]
    futures = runner.map(
        task_fn,
        {"sealed": unmapped(Sealed(scorer.settings)), "items": chunk_items, "cached": cached},
    )
    rewards: list[RewardBreakdown | None] = [None] * len(items)
    for chunk, part in zip(chunks, futures.result(), strict=True):
        for i, reward in zip(chunk, part.rewards, strict=True):
            rewards[i] = reward
        for key, values in part.computed.items():
            cache.update(key, values)
        _add_stats(scorer.stats, part.stats)
    return [r for r in rewards if r is not None]


def _add_stats(total: ScoreStats, part: ScoreStats) -> None:
    for f in fields(ScoreStats):
        setattr(total, f.name, getattr(total, f.name) + getattr(part, f.name))
