"""Model versions answering chat requests the way the gateway has them answer: the in-process
causal LM (batched, greedy, the gateway's prompt rendering) or an OpenAI-compatible server
called exactly as the gateway's ``HttpUpstream`` calls it. The release gate's generation path."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from infra.traces.conversation import Messages

if TYPE_CHECKING:
    from infra.serving.local_lm import LocalLM
    from infra.settings import Settings
    from infra.store import ObjectStore


@dataclass
class Answer:
    """One answer: its text, the seconds it took, and whether the upstream failed (then the text is
    empty)."""

    text: str
    latency_s: float
    error: bool = False


class AnswerSource(Protocol):
    """A model version answering chat requests as the gateway would have it answer them."""

    version: str
    lm: LocalLM | None  # the in-process model (drift checks), None for HTTP-served versions

    def answer(self, requests: Sequence[Messages], *, max_tokens: int) -> list[Answer]:
        """One answer per request, in order, at temperature 0 and at most ``max_tokens`` tokens."""


class LocalAnswers:
    """The in-process model, greedy, batched (same prompt rendering as the gateway's
    ``LocalUpstream``)."""

    def __init__(self, version: str, lm: LocalLM, *, batch_size: int = 64) -> None:
        self.version, self.batch_size = version, batch_size
        self.lm: LocalLM | None = lm
        self._lm = lm

    def answer(self, requests: Sequence[Messages], *, max_tokens: int) -> list[Answer]:
        """One answer per request, in order, generated greedily in batches of ``batch_size``; each
        answer's latency is its share of its batch's compute (LocalLM.compute_time)."""
        prompts = [self._lm.render(m) for m in requests]
        out: list[Answer] = []
        for start in range(0, len(prompts), self.batch_size):
            chunk = prompts[start : start + self.batch_size]
            t0 = self._lm.compute_time()  # CPU time on one thread: a busy machine moves it not
            gens = self._lm.generate_batch(chunk, temperature=0.0, max_new_tokens=max_tokens)
            per_item = (self._lm.compute_time() - t0) / len(chunk)  # amortised over the batch
            out.extend(Answer(g.text, per_item) for g in gens)
        return out


class HttpAnswers:
    """An OpenAI-compatible server (``FLYWHEEL_GATEWAY__UPSTREAMS``), called exactly as the
    gateway calls it (``HttpUpstream``), greedy, a few requests at a time, retried."""

    lm: LocalLM | None = None

    def __init__(
        self,
        version: str,
        base_url: str,
        *,
        concurrency: int = 8,
        retries: int = 3,
        api_key: str | None = None,
    ) -> None:
        self.version, self.base_url = version, base_url
        self.concurrency, self.retries = concurrency, retries
        self.key = api_key  # the upstream's key (FLYWHEEL_GATEWAY__UPSTREAMS), never logged

    def answer(self, requests: Sequence[Messages], *, max_tokens: int) -> list[Answer]:
        """One answer per request, in order; an answer the upstream still refused after retries has
        ``error`` set. Works from sync and async callers."""
        coro = self._answer_all(requests, max_tokens)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        with ThreadPoolExecutor(max_workers=1) as pool:  # called from async code
            return pool.submit(asyncio.run, coro).result()

    async def _answer_all(self, requests: Sequence[Messages], max_tokens: int) -> list[Answer]:
        from infra.errors import UpstreamError
        from infra.retries import Backoff, retry_async
        from infra.upstream.http1 import HttpClient
        from infra.upstream.upstreams import GenParams, HttpUpstream

        limit = asyncio.Semaphore(self.concurrency)
        params = GenParams(max_tokens=max_tokens, temperature=0.0)
        policy = Backoff(attempts=self.retries)
        client = HttpClient(limit=self.concurrency, timeout_s=120.0)
        try:
            upstream = HttpUpstream(self.version, self.base_url, lambda: client, api_key=self.key)

            async def one(messages: Messages) -> Answer:
                async with limit:
                    t0 = time.perf_counter()
                    try:  # unreachable, 408, 429, 5xx retried; any other 4xx is final
                        done = await retry_async(
                            lambda: upstream.complete(messages, params),
                            operation="gate upstream answer",
                            policy=policy,
                        )
                    except UpstreamError:
                        return Answer("", time.perf_counter() - t0, error=True)
                    return Answer(done.text, time.perf_counter() - t0)

            return list(await asyncio.gather(*(one(m) for m in requests)))
        finally:
            await client.close()


def open_answer_source(version: str, *, settings: Settings, store: ObjectStore) -> AnswerSource:
    """HTTP when the version has a configured upstream, else the in-process model from the store."""
    from infra.serving.base_servers import openai_base, version_urls
    from infra.serving.local_lm import LocalLM
    from infra.serving.models import fetch_model, model_cache_root, version_exists

    entry = settings.gateway.upstream(version)
    url, key = (entry.url, entry.api_key()) if entry is not None else (None, None)
    if not url and (urls := version_urls(version, settings, store)):  # on its base's server
        url, key = openai_base(urls[0]), settings.model_server_key()
    if url:
        http = HttpAnswers(version, url, api_key=key)
        if version_exists(store, version):  # the KL check evaluates its weights in process
            path = fetch_model(store, version, model_cache_root(settings))
            http.lm = LocalLM.load(path, device=settings.device)
        return http

    return LocalAnswers(
        version,
        LocalLM.load(
            fetch_model(store, version, model_cache_root(settings)), device=settings.device
        ),
    )
