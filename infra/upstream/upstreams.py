"""Model servers behind the gateway, one per model version: an OpenAI-compatible HTTP endpoint
(vLLM, llama.cpp server, any provider; ``FLYWHEEL_GATEWAY__UPSTREAMS``) or the in-process
causal LM fetched from ``models/<version>/`` in the object store (the embedded default)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import orjson

from infra.errors import ConfigError, UpstreamError, redact_url
from infra.serving.base_servers import ServedAt, ServerTrust, openai_base, read_served
from infra.traces.conversation import Messages
from infra.upstream.completion import (
    Completion,
    GenParams,
    choice_logprob_tokens,
    logprob_values,
    read_events,
)
from infra.upstream.http1 import HttpClient, HttpError, Stream
from infra.upstream.local import LocalUpstream, local_batcher
from infra.upstream.statuses import (
    MAX_ERROR_BODY,
    UpstreamUnavailable,
    status_error,
)

if TYPE_CHECKING:
    from infra.settings import Settings
    from infra.store import ObjectStore
    from infra.upstream.batcher import MicroBatcher

log = logging.getLogger(__name__)

HEALTH_TIMEOUT_S = 3.0
HEALTH_TTL_S = 2.0  # /healthz probes are answered from a check at most this old
SessionFactory = Callable[[], HttpClient]  # the pool's client, made in the running loop


class Upstream(Protocol):
    """What serves one model version: a whole completion or a stream of pieces."""

    version: str

    async def complete(self, messages: Messages, params: GenParams) -> Completion:
        """The whole completion; raises ``UpstreamError`` (``UpstreamUnavailable``: retryable)."""

    def stream(self, messages: Messages, params: GenParams) -> AsyncIterator[Completion]:
        """The completion as it is generated (raises as :meth:`complete`)."""


class HttpUpstream:
    """An OpenAI-compatible server; ``base_url`` as the ``openai`` client takes it (``.../v1``).
    Requests name the model as the version (e.g. vLLM ``--served-model-name v1``) and carry
    ``Authorization: Bearer <api_key>`` when the upstream has a key. Errors name the version,
    never the server's address or key (they reach clients in 502 bodies); a refusal
    (:class:`~infra.upstream.statuses.UpstreamRefused`) carries the server's own message with
    its address and key cut out (it reaches clients as their 4xx)."""

    def __init__(
        self,
        version: str,
        base_url: str,
        session: SessionFactory,
        *,
        api_key: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.version = version
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.session = session
        self.timeout_s = timeout_s
        if api_key is not None and any(c in api_key for c in "\r\n"):
            raise ConfigError(f"the upstream key of {version} holds a line break")
        self._headers = b"Authorization: Bearer %s\r\n" % api_key.encode() if api_key else b""
        parts = urlsplit(self.base_url)
        # what a refusal's message must not show a client: where the server is, its key
        self._hide: tuple[str, ...] = (self.base_url, redact_url(self.base_url), parts.netloc)
        self._hide += (parts.hostname or "", api_key or "")

    def __repr__(self) -> str:
        return f"HttpUpstream({self.version!r})"  # never the key

    async def check(self) -> str | None:
        """None when the server answers ``GET /models`` (any status under 500), else why not."""
        try:
            status, _ = await self.session().fetch(
                "GET", self.base_url + "/models", timeout_s=HEALTH_TIMEOUT_S, headers=self._headers
            )
        except HttpError as exc:
            return f"the upstream of {self.version} is unreachable: {exc}"
        if status >= 500:
            return f"the upstream of {self.version} answers HTTP {status}"
        return None

    def _body(self, messages: Messages, params: GenParams, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {**params.extra, "model": self.version, "messages": messages}
        if params.max_tokens is not None:  # none named: the server's own budget, not ours
            body["max_tokens"] = params.max_tokens
        for key in ("temperature", "top_p", "seed"):
            if getattr(params, key) is not None:
                body[key] = getattr(params, key)
        body["stream"] = stream
        if stream:  # the usage chunk, for the trace; passed on only to clients that asked
            body["stream_options"] = {"include_usage": True}
        # the trace records token logprobs (the gate's KL check): asked for on every request;
        # passed back only to clients that asked (chat.completion_body)
        body.setdefault("logprobs", True)
        return body

    async def _fetch(self, body: bytes) -> bytes:
        try:
            response = await self.session().request(
                "POST", self.url, body, timeout_s=self.timeout_s, headers=self._headers
            )
        except HttpError as exc:
            raise self._unreachable(exc) from exc
        if response.status >= 400:
            raise self._status_error(response.status, response.headers, response.body)
        return response.body

    def _status_error(
        self, status: int, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamError:
        return status_error(self.version, status, headers, body, hide=self._hide)

    def _unreachable(self, exc: HttpError) -> UpstreamUnavailable:
        log.warning("upstream %s (%s) failed: %s", self.version, redact_url(self.base_url), exc)
        return UpstreamUnavailable(f"{self.version}: {exc}")

    async def complete(self, messages: Messages, params: GenParams) -> Completion:
        """``POST /chat/completions``; any failure raises ``UpstreamError``."""
        raw = await self._fetch(orjson.dumps(self._body(messages, params, False)))
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
        """``POST /chat/completions`` as a server-sent event stream, one piece per chunk."""
        body = orjson.dumps(self._body(messages, params, True))
        try:
            response = await self.session().stream(
                "POST", self.url, body, timeout_s=self.timeout_s, headers=self._headers
            )
        except HttpError as exc:
            raise self._unreachable(exc) from exc
        try:
            if response.status >= 400:
                body = await _error_body(response)
                raise self._status_error(response.status, response.headers, body)
            async for piece in read_events(aiter(response)):
                yield piece
            await response.finish()  # the terminator after [DONE]: the connection is kept
        except HttpError as exc:
            raise self._unreachable(exc) from exc
        finally:
            response.close()


async def _error_body(response: Stream) -> bytes:
    """The body of an error answer to a stream request (its first ``MAX_ERROR_BODY`` bytes)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response:
            chunks.append(chunk)
            size += len(chunk)
            if size >= MAX_ERROR_BODY:
                break
    except HttpError:
        pass  # the status says enough; the message is then the generic one
    return b"".join(chunks)


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
        """None when every replica answers, else the first replica's reason."""
        for replica in self.replicas:
            if (reason := await replica.check()) is not None:
                return reason
        return None

    async def complete(self, messages: Messages, params: GenParams) -> Completion:
        """The completion from the next replica in turn."""
        return await self._pick().complete(messages, params)

    def stream(self, messages: Messages, params: GenParams) -> AsyncIterator[Completion]:
        """The stream from the next replica in turn."""
        return self._pick().stream(messages, params)


def model_server_upstream(
    version: str,
    settings: Settings,
    session: SessionFactory,
    *,
    urls: list[str] | tuple[str, ...] | None = None,
) -> Upstream:
    """``version`` on the model server of its base (``urls``: its replicas; default the
    configured server, ``FLYWHEEL_MODEL_SERVER__URLS``): the base model under its served name,
    an adapter under its version name (both are the version itself)."""
    roots = settings.model_server.urls if urls is None else urls
    urls = [openai_base(u) for u in roots]
    timeout_s = settings.gateway.upstream_timeout_s
    key = settings.model_server_key()
    replicas = [
        HttpUpstream(version, url, session, api_key=key, timeout_s=timeout_s) for url in urls
    ]
    return replicas[0] if len(replicas) == 1 else ReplicaUpstream(version, replicas)


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
        gw = settings.gateway
        for version in gw.upstreams:
            if version in self._upstreams:
                continue
            entry = gw.upstream(version)
            assert entry is not None
            self._upstreams[version] = HttpUpstream(
                version,
                entry.url,
                self.session,
                api_key=entry.api_key(),
                timeout_s=gw.upstream_timeout_s,
            )
        self._explicit = frozenset(self._upstreams)
        self._local: dict[str, LocalUpstream] = {}
        self._engine: MicroBatcher | None = None  # the in-process versions' shared batcher
        self._checks: dict[str, tuple[float, str | None]] = {}
        # versions on other bases' model servers (deploy/servers.json,
        # :mod:`infra.serving.base_servers`)
        self._served: dict[str, ServedAt] = {}
        self._trust: ServerTrust | None = None  # built on the first read (it reads the salt)
        self._on_bases: dict[str, tuple[tuple[str, ...], Upstream]] = {}

    def configured(self) -> list[str]:
        """Versions with an explicitly configured (HTTP or injected) upstream."""
        return sorted(self._upstreams)

    def refresh_served(self) -> None:
        """Read where versions on other bases' model servers are served (blocking; a failed
        read keeps the last map)."""
        if not self.settings.model_server.enabled:
            return
        try:
            if self._trust is None:
                self._trust = ServerTrust.from_settings(self.settings)
            self._served = read_served(self.store, self._trust)
        except Exception as exc:  # noqa: BLE001 - keep routing on the last good map
            log.warning("cannot read where model versions are served: %s", exc)

    def get(self, version: str) -> Upstream:
        """The upstream of ``version``: configured, else on the model server of its base (its
        own where one is recorded), else in process."""
        if version not in self._explicit and (at := self._served.get(version)) is not None:
            cached = self._on_bases.get(version)
            if cached is None or cached[0] != at.urls:
                on_base = model_server_upstream(version, self.settings, self.session, urls=at.urls)
                cached = self._on_bases[version] = (at.urls, on_base)
            return cached[1]
        upstream = self._upstreams.get(version) or self._local.get(version)
        if upstream is None and self.settings.model_server.enabled:
            upstream = model_server_upstream(version, self.settings, self.session)
            self._upstreams[version] = upstream
        if upstream is None:
            if self._engine is None:  # one for every in-process version (LocalUpstream)
                self._engine = local_batcher(self.settings, "in-process")
            upstream = LocalUpstream(
                version, store=self.store, settings=self.settings, engine=self._engine
            )
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
        from infra.serving.models import version_exists

        try:
            return version_exists(self.store, version)
        except Exception:  # noqa: BLE001 - an invalid name is simply unknown
            return False

    def session(self) -> HttpClient:
        """The shared HTTP client (connection pools), created inside the running loop."""
        if self._session is None:
            gw = self.settings.gateway
            self._session = HttpClient(
                limit=gw.upstream_connections, timeout_s=gw.upstream_timeout_s
            )
        return self._session

    async def aclose(self) -> None:
        """Close the shared HTTP client's connections."""
        if self._session is not None:
            await self._session.close()
