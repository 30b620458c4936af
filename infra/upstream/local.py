"""The in-process causal LM as an upstream: the embedded default model server, one
:class:`infra.serving.local_lm.LocalLM` per version fetched from ``models/<version>/`` in the
store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from infra.errors import UpstreamError
from infra.traces.conversation import Messages
from infra.upstream.batcher import MicroBatcher
from infra.upstream.completion import Completion, GenParams

if TYPE_CHECKING:
    from infra.settings import Settings
    from infra.store import ObjectStore

LOCAL_HINT = (
    " (run `flywheel bootstrap`, or give this version an HTTP upstream "
    "in FLYWHEEL_GATEWAY__UPSTREAMS)"
)


class LocalUpstream:
    """The in-process causal LM of ``version``: fetched and loaded on first use; concurrent
    requests are generated together in worker threads (:mod:`infra.upstream.batcher`, up to
    ``gateway.local_batch_size`` at once), each with its own parameters and seed. ``engine``:
    a batcher shared with the gateway's other in-process versions (:class:`UpstreamPool`
    passes one), so that a version's requests wait as long as another's whatever share of the
    traffic each serves; without one the version batches alone."""

    def __init__(
        self,
        version: str,
        *,
        store: ObjectStore,
        settings: Settings,
        engine: MicroBatcher | None = None,
    ) -> None:
        self.version = version
        self.store = store
        self.settings = settings
        self._lm: Any = None
        self._lock = asyncio.Lock()
        self._error: str | None = None  # why the last load failed
        self.engine = engine
        self.batcher: MicroBatcher | None = None

    async def check(self) -> str | None:
        """None when the model is loaded or loadable (in the store), else why not."""
        if self._lm is not None:
            return None
        from infra.serving.models import version_exists

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
        from infra.serving.local_lm import LocalLM
        from infra.serving.models import fetch_model, model_cache_root

        path = fetch_model(self.store, self.version, model_cache_root(self.settings))
        return LocalLM.load(path, device=self.settings.device)

    async def _model(self) -> Any:
        if self._lm is None:
            async with self._lock:
                if self._lm is None:
                    try:
                        lm = await asyncio.to_thread(self._load)
                    except Exception as exc:
                        self._error = str(exc)
                        raise UpstreamError(
                            f"model {self.version} unavailable: {exc}{LOCAL_HINT}"
                        ) from exc
                    self.batcher = self.engine or local_batcher(self.settings, self.version)
                    self._lm, self._error = lm, None
        return self._lm

    async def complete(self, messages: Messages, params: GenParams) -> Completion:
        """Generate (batched with concurrent requests), the model loaded on first use; raises
        ``UpstreamError``."""
        from infra.serving.local_lm import RowParams

        lm = await self._model()
        assert self.batcher is not None
        row = RowParams(
            temperature=params.temperature or 0.0,
            top_p=1.0 if params.top_p is None else params.top_p,
            # none named: the in-process model's own budget (it stops at none); never more
            # than its cap, since one client's 8,192 tokens would hold every batch it joins
            max_new_tokens=min(
                params.max_tokens or self.settings.gateway.max_new_tokens,
                self.settings.gateway.local_max_tokens,
            ),
            seed=params.seed,
        )
        gen = await self.batcher.submit(
            lm.render(messages), row, generate=lm.generate_rows, group=self.version
        )
        return Completion(
            text=gen.text,
            tokens_in=gen.tokens_in,
            tokens_out=gen.tokens_out,
            logprobs=list(gen.logprobs) or None,
            finish_reason=getattr(gen, "finish_reason", "stop"),
            compute_s=getattr(gen, "compute_s", None),
            batch_size=getattr(gen, "batch_size", None),
        )

    async def stream(self, messages: Messages, params: GenParams) -> AsyncIterator[Completion]:
        """The whole completion as a single piece (the in-process model does not stream)."""
        yield await self.complete(messages, params)


def local_batcher(settings: Settings, name: str) -> MicroBatcher:
    """A batcher for in-process generation at the gateway's batch size and wait."""
    gw = settings.gateway
    return MicroBatcher(
        name=name, max_batch=gw.local_batch_size, max_wait_s=gw.local_batch_wait_ms / 1000
    )
