"""The scorer shared by stage 2, the release gate and shadow: one judge, one ragas mode and
one set of weights, so a model is judged the same way in every place.

Use :class:`Scorer` (``Scorer(settings).score(items, cache)``) for many answers, or
:func:`score_batch` / :func:`score_answer`. Each distinct content is computed once per run and
not at all when :class:`~tasks.reward.cache.ComponentCache` holds it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from infra.errors import JudgeError
from tasks.reward.cache import ComponentCache
from tasks.reward.components import (
    CACHED,
    RewardBreakdown,
    cache_namespace,
    clamp,
    combine,
    content_key,
    feedback_component,
    latency_component,
    resolve_ragas_mode,
    reward_config_hash,
    unmet_requirements,
)
from tasks.reward.context import ContextMetrics
from tasks.reward.items import ScoreItem, ScoreStats
from tasks.reward.judges import Judge, LLMJudge, build_judge
from tasks.reward.verifiers import PluginVerifier, VerifierTrace

if TYPE_CHECKING:
    from collections.abc import Coroutine, Sequence

    from infra.llm import ChatClient
    from infra.settings import Settings

log = logging.getLogger(__name__)


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
        self.verifiers: dict[str, Judge] = {
            w: PluginVerifier(spec) for w, spec in sorted(settings.reward.verifiers.items())
        }
        self.metrics = ContextMetrics(self.ragas_mode, client)
        self.stats = ScoreStats()
        judges = self.judge.config_id
        if self.verifiers:
            judges += "+" + ",".join(f"{w}={j.config_id}" for w, j in self.verifiers.items())
        self.config_hash = reward_config_hash(settings, judge=judges, ragas_mode=self.ragas_mode)
        self.namespace = cache_namespace(judges, self.ragas_mode)

    def judge_for(self, item: ScoreItem) -> Judge:
        """The workload's verifier (``reward.verifiers``), else the scorer's judge."""
        return self.verifiers.get(item.workload, self.judge)

    def key(self, item: ScoreItem) -> str:
        """The cache key of ``item``'s verdicts (content, judge and verifier)."""
        judge = self.verifiers.get(item.workload)
        reference = item.reference
        if judge is not None:  # another verifier: another verdict for the same content
            reference = f"{reference}\x00{judge.config_id}"
        return content_key(
            self.namespace,
            question=item.question,
            contexts=item.contexts,
            answer=item.answer,
            reference=reference,
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
        """Close the judge's client."""
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
            self._breakdown(item, cache.get(key), skip=skip)
            for item, key, skip in zip(items, keys, skips, strict=True)
        ]

    async def acomponents(
        self, items: Sequence[ScoreItem], which: set[str]
    ) -> list[dict[str, float | None]]:
        """Only the components in ``which`` of each item, uncached (GRPO's online reward:
        every completion is new). A failed component is None, one that does not apply NaN.
        Closes the HTTP pool when done."""
        try:
            done = await self._gather([self._compute(item, which) for item in items])
        finally:
            self._copy_client_stats()
            await self.aclose()
        return [{c: values.get(c) for c in which} for values in done]

    def _skips(self, item: ScoreItem) -> bool:
        skip = bool(
            self.settings.judge.skip_when_feedback
            and self.judge_for(item).costly
            and item.feedback is not None
        )
        self.stats.judge_skipped += int(skip)
        return skip

    def _breakdown(
        self, item: ScoreItem, cached: dict[str, float], *, skip: bool
    ) -> RewardBreakdown:
        r = self.settings.reward
        comps: dict[str, float | None] = {c: cached.get(c) for c in CACHED}
        if skip:  # even when cached: a trace's reward must not depend on its neighbours
            comps["judge"] = None
        comps["feedback"] = feedback_component(item.feedback, r.feedback_none)
        comps["latency"] = latency_component(
            item.latency_s, ok_s=r.latency_ok_s, max_s=r.latency_max_s
        )
        b = combine(comps, r)
        unmet = unmet_requirements(
            r.required,
            present={c for c in comps if c not in b.missing},
            user_feedback=item.feedback is not None,
        )
        self.stats.ineligible += int(bool(unmet))
        judge = comps["judge"]
        status = (
            "skipped_for_feedback"
            if skip
            else "failed"
            if judge is None
            else "not_applicable"
            if math.isnan(judge)
            else "ok"
        )
        total = 0.0 if r.thumbs_down_veto and item.feedback == -1 else b.total
        return dataclasses.replace(
            b,
            total=total,
            unmet=unmet,
            judge_status=status,
            judge_id=self.judge_for(item).config_id,
        )

    async def _compute(self, item: ScoreItem, which: set[str]) -> dict[str, float]:
        """The components in ``which`` that could be computed (NaN = not applicable)."""
        judge = self.judge_for(item)
        jobs: dict[str, Coroutine[Any, Any, float | None]] = {}
        if isinstance(judge, PluginVerifier):  # its verdict may carry the reference
            verdict, reference = await self._verify(judge, item, which)
            if "judge" in which:
                jobs["judge"] = verdict
        else:
            reference = item.reference or judge.reference_for(item.question, item.contexts)
            if reference is None and "context_recall" in which:
                reference = await self._llm_reference(judge, item)
            if "judge" in which:
                self.stats.judge_calls += 1
                jobs["judge"] = judge.judge(
                    question=item.question,
                    contexts=item.contexts,
                    answer=item.answer,
                    reference=reference,
                )
        if "faithfulness" in which:
            jobs["faithfulness"] = self.metrics.faithfulness(
                question=item.question, contexts=item.contexts, answer=item.answer
            )
        if "context_recall" in which:
            jobs["context_recall"] = self.metrics.context_recall(
                question=item.question, contexts=item.contexts, reference=reference
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

    async def _verify(
        self, judge: PluginVerifier, item: ScoreItem, which: set[str]
    ) -> tuple[Coroutine[Any, Any, float | None], str | None]:
        """Run a plug-in verifier once: its verdict (as an awaitable, so failures land where
        the judge's do) and the reference it gave, else the item's."""
        trace = VerifierTrace(
            question=item.question,
            contexts=list(item.contexts),
            answer=item.answer,
            reference=item.reference,
            workload=item.workload,
            trace_id=item.trace_id,
        )
        self.stats.judge_calls += int("judge" in which)
        try:
            verdict = await judge.verify(trace)
        except Exception as exc:  # noqa: BLE001 - reported as the judge component's failure
            error = exc

            async def failed() -> float | None:
                raise error

            return failed(), item.reference
        score = verdict.score

        async def done() -> float | None:
            return score

        return done(), item.reference or verdict.reference

    async def _llm_reference(self, judge: Judge, item: ScoreItem) -> str | None:
        """A reference from the LLM judge where ``judge.reference_from_llm`` allows (None on
        failure: context recall is then not applicable, and the failure is logged)."""
        if not (self.settings.judge.reference_from_llm and isinstance(judge, LLMJudge)):
            return None
        try:
            reference = await judge.areference(question=item.question, contexts=item.contexts)
        except Exception as exc:  # noqa: BLE001 - a reference is optional
            log.info("reference from the LLM judge failed: %s", type(exc).__name__)
            return None
        self.stats.references_from_llm += int(reference is not None)
        return reference

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
    *,
    judge: Judge | None = None,
    settings: Settings | None = None,
    ragas_mode: str | None = None,
    cache: ComponentCache | None = None,
) -> list[RewardBreakdown]:
    """Score ``items`` with the judge and ragas mode of ``settings`` unless given."""
    return Scorer(_settings(settings), judge=judge, ragas_mode=ragas_mode).score(items, cache)


async def ascore_batch(
    items: Sequence[ScoreItem],
    *,
    judge: Judge | None = None,
    settings: Settings | None = None,
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
    item: ScoreItem,
    *,
    judge: Judge | None = None,
    settings: Settings | None = None,
    ragas_mode: str | None = None,
) -> RewardBreakdown:
    """The reward of one answer (use :class:`Scorer` or :func:`score_batch` for many)."""
    return score_batch([item], judge=judge, settings=settings, ragas_mode=ragas_mode)[0]


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
