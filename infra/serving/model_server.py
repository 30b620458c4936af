"""Model servers the release drives: a :class:`ModelServer` loads a published LoRA adapter under
its version name, unloads it, lists what it serves and answers a health check. The one
implementation is :class:`VLLMServer` (vLLM's OpenAI server started with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``), over one or more replicas that are loaded and
unloaded together: a version is loaded only when every replica loaded it.

The adapter path must be readable by the server: the local store's own directory
(``models/<version>/``), or, for an S3 store, a copy synced into ``adapter_dir`` first.
``server_path`` names that directory as the server sees it (a container mount).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from infra.errors import ModelServerError

if TYPE_CHECKING:
    from infra.settings import ModelServerSettings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)


class ModelServer(Protocol):
    """A server that serves ``base_version`` and loads or unloads LoRA adapters as model
    versions (:class:`infra.serving.base_servers.BaseServers`: one such server per base model)."""

    base_version: str

    def load(self, version: str, path: str) -> None:
        """Serve the adapter at ``path`` as ``version`` (raises ``ModelServerError`` on failure)."""

    def unload(self, version: str) -> None:
        """Stop serving ``version`` (never the base model; raises ``ModelServerError`` on
        failure)."""

    def served(self) -> list[str]:
        """The versions the server serves now."""

    def health(self) -> str | None:
        """None when the server is healthy, else why not."""

    def refusal(self, version: str, max_loras: int) -> str | None:
        """Why loading ``version`` would exceed ``max_loras`` adapters (None: it has room)."""


def _where(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


class VLLMServer:
    """vLLM replicas (``urls``: ``http://host:port``) serving ``base_version`` plus adapters."""

    def __init__(
        self,
        urls: list[str],
        *,
        base_version: str = "v0",
        timeout_s: float = 120.0,
        max_loras: int | None = None,
        api_key: str | None = None,
    ) -> None:
        if not urls:
            raise ModelServerError("no model server URL (FLYWHEEL_MODEL_SERVER__URLS)")
        self.urls = [u.rstrip("/").removesuffix("/v1") for u in urls]
        self.base_version = base_version
        self.timeout_s = timeout_s
        self.max_loras = max_loras  # None: no limit of flywheel's own
        self.api_key = api_key
        # vLLM --api-key guards /v1/* (adapter loading included); /health stays open
        self._auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _post(self, url: str, path: str, body: dict[str, Any]) -> tuple[int, str]:
        import httpx

        from infra.http import tls

        try:
            resp = httpx.post(
                url + path, json=body, headers=self._auth, timeout=self.timeout_s, verify=tls()
            )
        except httpx.HTTPError as exc:
            return 0, f"unreachable ({type(exc).__name__})"
        return resp.status_code, resp.text[:300]

    def load(self, version: str, path: str) -> None:
        """Load the adapter at ``path`` as ``version`` on every replica (already loaded counts).

        Raises:
            ModelServerError: a replica did not load it (replicas that did are unloaded
                again), or loading it would exceed ``max_loras`` (nothing is loaded).
        """
        if self.max_loras is not None and (why := capacity_refusal(self, version, self.max_loras)):
            raise ModelServerError(why)
        done: list[str] = []
        for url in self.urls:
            if version in self._models(url):
                done.append(url)
                continue
            status, text = self._post(
                url, "/v1/load_lora_adapter", {"lora_name": version, "lora_path": path}
            )
            if status != 200:
                for ok in done:
                    self._post(ok, "/v1/unload_lora_adapter", {"lora_name": version})
                why = f"HTTP {status}: {text}" if status else text
                raise ModelServerError(
                    f"model server {_where(url)} did not load {version} from {path}: {why}"
                )
            done.append(url)
        log.info("loaded adapter %s on %d replica(s)", version, len(done))

    def unload(self, version: str) -> None:
        """Unload ``version`` from every replica that serves it (never the base model).

        Raises:
            ModelServerError: a replica still lists it after the request.
        """
        if version == self.base_version:
            return
        failed = []
        for url in self.urls:
            if version not in self._models(url):
                continue
            status, text = self._post(url, "/v1/unload_lora_adapter", {"lora_name": version})
            if status != 200:
                failed.append(f"{_where(url)}: HTTP {status}: {text}" if status else text)
        if failed:
            raise ModelServerError(f"{version} not unloaded: " + "; ".join(failed))
        log.info("unloaded adapter %s", version)

    def _models(self, url: str) -> list[str]:
        import httpx

        from infra.http import tls

        try:
            resp = httpx.get(
                url + "/v1/models", headers=self._auth, timeout=self.timeout_s, verify=tls()
            )
            resp.raise_for_status()
            return [str(m["id"]) for m in resp.json().get("data", [])]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise ModelServerError(
                f"model server {_where(url)} cannot list its models: {type(exc).__name__}"
            ) from exc

    def served(self) -> list[str]:
        """Versions every replica serves (the base model and the loaded adapters)."""
        sets = [set(self._models(url)) for url in self.urls]
        return sorted(set.intersection(*sets))

    def health(self) -> str | None:
        """None when every replica answers ``/health``, else why not."""
        import httpx

        from infra.http import tls

        for url in self.urls:
            try:
                if httpx.get(url + "/health", timeout=5.0, verify=tls()).status_code != 200:
                    return f"model server {_where(url)} is not healthy"
            except httpx.HTTPError as exc:
                return f"model server {_where(url)} is unreachable ({type(exc).__name__})"
        return None

    def refusal(self, version: str, max_loras: int) -> str | None:
        """:func:`capacity_refusal` of this server."""
        return capacity_refusal(self, version, max_loras)


def capacity_refusal(server: ModelServer, version: str, max_loras: int) -> str | None:
    """Why ``server`` cannot load ``version`` without exceeding ``max_loras`` adapters (what
    it serves now, the base model aside), in one line naming the limit and the adapters
    loaded; None when it serves ``version`` already or has room."""
    served = server.served()
    if version in served:
        return None
    adapters = [v for v in served if v != server.base_version]
    if len(adapters) < max_loras:
        return None
    return (
        f"model server full: it holds {len(adapters)} of at most {max_loras} adapters "
        f"(FLYWHEEL_MODEL_SERVER__MAX_LORAS, vLLM --max-loras): {', '.join(adapters)}; "
        f"{version} not loaded (finish or roll back a release, or raise the limit on both)"
    )


def adapter_path(
    store: ObjectStore, version: str, *, settings: ModelServerSettings, cache_root: Path
) -> str:
    """Where the model server reads ``version``'s adapter: the local store's directory, or a
    copy fetched from the object store into ``adapter_dir`` (default ``cache_root``); as the
    server sees it (``server_path``)."""
    from infra.serving.models import fetch_model

    local_root = getattr(store, "root", None)
    if isinstance(local_root, Path):
        from infra.keys import model_prefix

        path, base = local_root / model_prefix(version), local_root
    else:
        base = settings.adapter_dir or cache_root
        path = fetch_model(store, version, base)
    if settings.server_path:
        return str(Path(settings.server_path) / path.relative_to(base))
    return str(path)
