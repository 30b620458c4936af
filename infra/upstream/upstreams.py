"""Model servers behind the gateway, one per model version: an OpenAI-compatible HTTP endpoint
(vLLM, llama.cpp server, any provider; ``FLYWHEEL_GATEWAY__UPSTREAMS``) or the in-process
causal LM fetched from ``models/<version>/`` in the object store (the embedded default).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from infra.errors import UpstreamError
from infra.upstream.completion import (
    Completion,
    GenParams,
    Messages,
    choice_logprob_tokens,
    logprob_values,
    read_events,
)
from infra.upstream.http1 import HttpClient, HttpError

if TYPE_CHECKING:
    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

HEALTH_TIMEOUT_S = 3.0
HEALTH_TTL_S = 2.0  # /healthz probes are answered from a check at most this old
LOCAL_HINT = (
    " (run `flywheel bootstrap`, or give this version an HTTP upstream "
    "in FLYWHEEL_GATEWAY__UPSTREAMS)"
)
SessionFactory = Callable[[], HttpClient]  # the pool's client, made in the running loop


class Upstream(Protocol):
    version: str

    async def complete(self, messages: Messages, params: GenParams) -> Completion: ...

    def stream(self, messages: Messages, params: GenParams) -> AsyncIterator[Completion]: ...


class HttpUpstream:
    """An OpenAI-compatible server; ``base_url`` as the ``openai`` client takes it (``.../v1``).
    Requests name the model as the version (e.g. vLLM ``--served-model-name v1``).

    Calls go through the gateway's own HTTP/1.1 client (:mod:`infra.upstream.http1`): aiohttp
    spent ~0.35 ms of CPU per call here and httpx ~1.2 ms, most of the gateway's budget."""

    def __init__(self, version: str, base_url: str, session: SessionFactory) -> None:
        self.version = version
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.session = session

    async def check(self) -> str | None:
        """None when the server answers ``GET /models`` (any status under 500), else why not."""
        from urllib.parse import urlsplit

        parts = urlsplit(self.base_url)
        where = f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"
        try:
            status, _ = await self.session().fetch(
                "GET", self.base_url + "/models", timeout_s=HEALTH_TIMEOUT_S
            )
        except HttpError as exc:
            return f"the upstream of {self.version} ({where}) is unreachable: {exc}"
        if status >= 500:
            return f"the upstream of {self.version} ({where}) answers HTTP {status}"
        return None

    def _body(self, messages: Messages, params: GenParams, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {**params.extra, "model": self.version, "messages": messages}
        body["max_tokens"] = params.max_tokens
        for key in ("temperature", "top_p", "seed"):
            if getattr(params, key) is not None:
                body[key] = getattr(params, key)
        body["stream"] = stream
        # the trace records token logprobs (the gate's KL check): asked for on every request;
        # passed back only to clients that asked (chat.completion_body)
        body.setdefault("logprobs", True)
        return body

    async def complete(self, messages: Messages, params: GenParams) -> Completion:
        body = orjson.dumps(self._body(messages, params, False))
        try:
            status, raw = await self.session().fetch("POST", self.url, body)
        except HttpError as exc:
            raise UpstreamError(f"{self.version}: {exc}") from exc
        if status >= 400:
            raise UpstreamError(f"{self.version}: HTTP {status}")
        try:
            data = orjson.loads(raw)
        except ValueError as exc:
            raise UpstreamError(f"{self.version}: response is not JSON") from exc
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise UpstreamError(f"{self.version}: malformed response") from exc
        usage = data.get("usage") or {}
        tokens = choice_logprob_tokens(choice)
        return Completion(
            text=message.get("content") or "",
            tokens_in=usage.get("prompt_tokens"),
            tokens_out=usage.get("completion_tokens"),
            logprobs=logprob_values(tokens),
            finish_reason=choice.get("finish_reason") or "stop",
            tool_calls=list(message.get("tool_calls") or []),
            logprob_tokens=tokens,
        )

    async def stream(self, messages: Messages, params: GenParams) -> AsyncIterator[Completion]:
        body = orjson.dumps(self._body(messages, params, True))
        try:
            response = await self.session().stream("POST", self.url, body)
        except HttpError as exc:
            raise UpstreamError(f"{self.version}: {exc}") from exc
        try:
            if response.status >= 400:
                raise UpstreamError(f"{self.version}: HTTP {response.status}")
            async for piece in read_events(aiter(response)):
                yield piece
            await response.finish()  # the terminator after [DONE]: the connection is kept
        except HttpError as exc:
            raise UpstreamError(f"{self.version}: {exc}") from exc
        finally:
            response.close()


class ReplicaUpstream:
    """One version served by several model-server replicas (the same model name on each):
    calls go round-robin; a replica that fails a call is not retried here."""

    def __init__(self, version: str, replicas: list[HttpUpstream]) -> None:
        self.version = version
        self.replicas = replicas
        self._next = 0

    def _pick(self) -> HttpUpstream:
        self._next = (self._next + 1) % len(self.replicas)
        return self.replicas[self._next]

    async def check(self) -> str | None:
        for replica in self.replicas:
            if (reason := await replica.check()) is not None:
                return reason
        return None

    async def complete(self, messages: Messages, params: GenParams) -> Completion:
        return await self._pick().complete(messages, params)

    def stream(self, messages: Messages, params: GenParams) -> AsyncIterator[Completion]:
        return self._pick().stream(messages, params)


def model_server_upstream(version: str, settings: Settings, session: SessionFactory) -> Upstream:
    """``version`` on the model server (``FLYWHEEL_MODEL_SERVER__URLS``): the base model under
    its served name, an adapter under its version name (both are the version itself)."""
    urls = [u.rstrip("/").removesuffix("/v1") + "/v1" for u in settings.model_server.urls]
    replicas = [HttpUpstream(version, url, session) for url in urls]
    return replicas[0] if len(replicas) == 1 else ReplicaUpstream(version, replicas)


class LocalUpstream:
    """The in-process causal LM of ``version``: fetched and loaded on first use; generation
    runs in worker threads (``limiter`` bounds how many at once)."""

    def __init__(self, version: str, *, store: ObjectStore, settings: Settings) -> None:
        self.version = version
        self.store = store
        self.settings = settings
        self._lm: Any = None
        self._lock = asyncio.Lock()
        self._limiter = asyncio.Semaphore(4)
        self._error: str | None = None  # why the last load failed

    async def check(self) -> str | None:
        """None when the model is loaded or loadable (in the store), else why not."""
        if self._lm is not None:
            return None
        from infra.models import version_exists

        try:
            exists = await asyncio.to_thread(version_exists, self.store, self.version)
        except Exception as exc:  # noqa: BLE001 - the reason is the answer
            return f"model {self.version}: the store cannot be read ({type(exc).__name__})"
        if not exists:
            return f"model {self.version} is not in the store{LOCAL_HINT}"
        if self._error is not None:
            return f"model {self.version} failed to load: {self._error}"
        return None

    def _load(self) -> Any:
        from infra.local_lm import LocalLM
        from infra.models import fetch_model, model_cache_root

        path = fetch_model(self.store, self.version, model_cache_root(self.settings))
        return LocalLM.load(path, device=self.settings.device)

    async def _model(self) -> Any:
        if self._lm is None:
            async with self._lock:
                if self._lm is None:
                    try:
                        self._lm = await asyncio.to_thread(self._load)
                    except Exception as exc:
                        self._error = str(exc)
                        raise UpstreamError(
                            f"model {self.version} unavailable: {exc}{LOCAL_HINT}"
                        ) from exc
                    self._error = None
        return self._lm

    async def complete(self, messages: Messages, params: GenParams) -> Completion:
        lm = await self._model()
        prompt = lm.render(messages)
        async with self._limiter:
            try:
                gen = await asyncio.to_thread(
                    lm.generate,
                    prompt,
                    temperature=params.temperature or 0.0,
                    top_p=1.0 if params.top_p is None else params.top_p,
                    max_new_tokens=params.max_tokens,
                    seed=params.seed,
                )
            except Exception as exc:
                raise UpstreamError(f"{self.version}: generation failed: {exc}") from exc
        return Completion(
            text=gen.text,
            tokens_in=gen.tokens_in,
            tokens_out=gen.tokens_out,
            logprobs=list(gen.logprobs) or None,
            finish_reason=getattr(gen, "finish_reason", "stop"),
        )

    async def stream(self, messages: Messages, params: GenParams) -> AsyncIterator[Completion]:
        yield await self.complete(messages, params)


class UpstreamPool:
    """Upstreams by version: injected ones first, then HTTP ones from settings, else local."""

    def __init__(
        self,
        settings: Settings,
        store: ObjectStore,
        *,
        overrides: dict[str, Upstream] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self._session: HttpClient | None = None
        self._upstreams: dict[str, Upstream] = dict(overrides or {})
        for version, url in settings.gateway.upstreams.items():
            self._upstreams.setdefault(version, HttpUpstream(version, url, self.session))
        self._local: dict[str, LocalUpstream] = {}
        self._checks: dict[str, tuple[float, str | None]] = {}

    def configured(self) -> list[str]:
        """Versions with an explicitly configured (HTTP or injected) upstream."""
        return sorted(self._upstreams)

    def get(self, version: str) -> Upstream:
        upstream = self._upstreams.get(version) or self._local.get(version)
        if upstream is None and self.settings.model_server.enabled:
            upstream = model_server_upstream(version, self.settings, self.session)
            self._upstreams[version] = upstream
        if upstream is None:
            upstream = LocalUpstream(version, store=self.store, settings=self.settings)
            self._local[version] = upstream
        return upstream

    async def preload(self, version: str) -> None:
        """Load ``version``'s in-process model now (so the first user does not wait for it);
        a missing model is only logged here, and reported to users when they ask for it."""
        upstream = self.get(version)
        if isinstance(upstream, LocalUpstream):
            try:
                await upstream._model()
            except UpstreamError as exc:
                log.info("not preloaded: %s", exc)

    async def check(self, version: str) -> str | None:
        """None when ``version`` can be served now, else why not (checked at most every
        ``HEALTH_TTL_S``; an injected upstream without a ``check`` method counts as up)."""
        now = time.monotonic()
        cached = self._checks.get(version)
        if cached is not None and now - cached[0] < HEALTH_TTL_S:
            return cached[1]
        check = getattr(self.get(version), "check", None)
        reason = await check() if check is not None else None
        self._checks[version] = (time.monotonic(), reason)
        return reason

    def exists(self, version: str) -> bool:
        """Whether ``version`` can be served (configured, or published in the store). Blocking."""
        if version in self._upstreams:
            return True
        from infra.models import version_exists

        try:
            return version_exists(self.store, version)
        except Exception:  # noqa: BLE001 - an invalid name is simply unknown
            return False

    def session(self) -> HttpClient:
        """The shared HTTP client (connection pools), created inside the running loop."""
        if self._session is None:
            self._session = HttpClient(limit=512, timeout_s=120.0)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
