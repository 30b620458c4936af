"""Model servers by base model. A version is served by the server of its base: an adapter by
the server of the full version it applies to (``base_model.json``), a full model (a distilled
student) by a server of its own, as vLLM serves one base per process.

The configured server (``FLYWHEEL_MODEL_SERVER__URLS``) serves ``base_version`` and its
adapters. Every other base is served by a server the operator runs and names
(``FLYWHEEL_MODEL_SERVER__BASES``: base version -> replica URLs), or, where this process owns a
:class:`Launcher` (``flywheel run --server vllm``), by a local vLLM the release starts when it
loads the base (before the gate asks it anything) and stops when nothing routes to it.

Where each version on another base is served is recorded in the object store
(``deploy/servers.json``: version -> its base and URLs, written by compare-and-swap) by whoever
loads or unloads it, and read by the gateway (polled) and by the release's answer sources: the
one map from a version to its upstream beside ``FLYWHEEL_GATEWAY__UPSTREAMS``.

The store is not trusted to choose where conversations go: whoever can write the bucket could
otherwise send every request of a version, personal data included, to a host of their own
within one poll. A recorded entry is used only when each of its URLs is a configured server
(``FLYWHEEL_MODEL_SERVER__URLS`` or ``__BASES``) or the entry carries the signature of a
process that holds the project's secret (an HMAC-SHA256 keyed from the user salt,
``FLYWHEEL_USER_SALT``, which every flywheel service shares and the object store never sees):
the release signs what it records; an entry that is neither is ignored with a warning, and
dropped at the map's next write (:class:`ServerTrust`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from infra.errors import ModelServerError, ObjectNotFound, PreconditionFailed
from infra.keys import SERVERS_KEY

if TYPE_CHECKING:
    from infra.serving.model_server import VLLMServer
    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServedAt:
    """Where one version is served: its base version and the base server's replica URLs."""

    base: str
    urls: tuple[str, ...]


def base_of(store: ObjectStore, version: str, *, default: str) -> str:
    """The full version ``version`` runs on: the base an adapter names, ``default`` (the
    configured server's base) for an adapter that names none, else ``version`` itself (a full
    model: a base of its own)."""
    from infra.keys import model_prefix
    from infra.serving.causal_lm import ADAPTER_CONFIG, BASE_MODEL_FILE

    prefix = model_prefix(version)
    try:
        raw = store.get(prefix + BASE_MODEL_FILE)
    except ObjectNotFound:
        return default if store.exists(prefix + ADAPTER_CONFIG) else version
    return str(json.loads(raw)["version"])


@dataclass(frozen=True)
class ServerTrust:
    """Which recorded servers may be used (see the module docstring): the configured URLs, and
    the key that signs what a release records."""

    key: bytes
    configured: frozenset[str]

    @classmethod
    def from_settings(cls, settings: Settings) -> ServerTrust:
        """The trust of this deployment: its configured servers and a key derived from its
        salt (never the salt itself)."""
        ms = settings.model_server
        key = hmac.new(settings.salt().encode(), b"flywheel deploy/servers.json", "sha256")
        urls = {*ms.urls, *(u for urls in ms.bases.values() for u in urls)}
        return cls(key=key.digest(), configured=frozenset(_norm(u) for u in urls))

    def sign(self, version: str, at: ServedAt) -> str:
        """The signature of one entry (its version, base and URLs, in order)."""
        message = "\x00".join([version, at.base, *at.urls]).encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def trusts(self, version: str, at: ServedAt, signature: object) -> bool:
        """Whether the entry may be used: every URL configured, or signed with this key."""
        if at.urls and all(_norm(u) in self.configured for u in at.urls):
            return True
        return isinstance(signature, str) and hmac.compare_digest(signature, self.sign(version, at))


def _norm(url: str) -> str:
    return url.rstrip("/").removesuffix("/v1")


_warned: set[tuple[str, tuple[str, ...]]] = set()  # untrusted entries already logged


def _parse(raw: bytes, trust: ServerTrust) -> dict[str, ServedAt]:
    data = json.loads(raw).get("versions", {})
    out = {}
    for v, e in data.items():
        at = ServedAt(str(e["base"]), tuple(str(u) for u in e["urls"]))
        if trust.trusts(str(v), at, e.get("sig")):
            out[str(v)] = at
        elif (str(v), at.urls) not in _warned:
            _warned.add((str(v), at.urls))
            log.warning(
                "%s: the entry for %s names a server that is neither configured nor signed "
                "by a release of this deployment: ignored",
                SERVERS_KEY,
                v,
            )
    return out


def read_served(store: ObjectStore, trust: ServerTrust) -> dict[str, ServedAt]:
    """Every version recorded as served by a server of another base that ``trust`` accepts
    (none: ``{}``)."""
    try:
        return _parse(store.get(SERVERS_KEY), trust)
    except ObjectNotFound:
        return {}


def record_served(
    store: ObjectStore, changes: dict[str, ServedAt | None], trust: ServerTrust
) -> None:
    """Record (``ServedAt``, signed) or forget (None) where versions are served; an entry that
    ``trust`` does not accept is dropped. Concurrent writers (two workloads' releases) both
    land: the write is conditional on the map read, and a lost race reads again."""
    from infra.cas import compare_and_swap

    def read() -> tuple[dict[str, ServedAt], str | None]:
        try:
            raw, etag = store.get_versioned(SERVERS_KEY)
        except ObjectNotFound:
            return {}, None
        return _parse(raw, trust), etag

    def decide(found: tuple[dict[str, ServedAt], str | None]) -> dict[str, ServedAt] | None:
        new = dict(found[0])
        for version, at in changes.items():
            if at is None:
                new.pop(version, None)
            else:
                new[version] = at
        return None if new == found[0] else new

    def write(found: tuple[dict[str, ServedAt], str | None], new: dict[str, ServedAt]) -> None:
        body = {
            v: {"base": at.base, "urls": list(at.urls), "sig": trust.sign(v, at)}
            for v, at in sorted(new.items())
        }
        data = json.dumps({"versions": body}, indent=1).encode()
        store.put_if(SERVERS_KEY, data, etag=found[1])

    compare_and_swap(read, decide, write, operation="model_servers", retry_on=(PreconditionFailed,))


def openai_base(url: str) -> str:
    """A model server's URL (``http://host:port``, with or without ``/v1``) as the ``openai``
    client takes it (``.../v1``)."""
    return url.rstrip("/").removesuffix("/v1") + "/v1"


def version_urls(version: str, settings: Settings, store: ObjectStore) -> list[str] | None:
    """The replica URLs (``http://host:port``) of the model server that serves ``version``: the
    server of its base where one is recorded, else the configured server (None: no model
    server, the version is served in process)."""
    if not settings.model_server.enabled:
        return None
    if (at := read_served(store, ServerTrust.from_settings(settings)).get(version)) is not None:
        return list(at.urls)
    return list(settings.model_server.urls)


class Launcher(Protocol):
    """Starts and stops one model server per base model on this machine."""

    def start(self, base: str, model_dir: str) -> list[str]:
        """Serve the full model at ``model_dir`` as ``base``; its replica URLs (raises
        ``ModelServerError`` when it does not come up)."""

    def stop(self, base: str) -> None:
        """End the server of ``base`` (nothing when none runs)."""

    def running(self) -> dict[str, list[str]]:
        """The bases served now, with their URLs."""


_launcher: list[Launcher] = []  # the innermost `launching` block's, for this process


@contextmanager
def launching(launcher: Launcher) -> Iterator[Launcher]:
    """Releases in this block start the servers of new bases with ``launcher``."""
    _launcher.append(launcher)
    try:
        yield launcher
    finally:
        _launcher.remove(launcher)


def current_launcher() -> Launcher | None:
    """The launcher of the innermost :func:`launching` block (None outside one)."""
    return _launcher[-1] if _launcher else None


class BaseServers:
    """The release's model server: ``primary`` (the configured server, ``base_version`` and its
    adapters) and one server per other base (see the module docstring)."""

    def __init__(
        self,
        primary: VLLMServer,
        *,
        store: ObjectStore,
        trust: ServerTrust,
        bases: dict[str, list[str]] | None = None,
        launcher: Launcher | None = None,
    ) -> None:
        self.primary = primary
        self.trust = trust
        self.base_version = primary.base_version
        self.store = store
        self.bases = dict(bases or {})
        self.launcher = launcher

    def _server(self, base: str, urls: list[str] | tuple[str, ...]) -> VLLMServer:
        from infra.serving.model_server import VLLMServer

        p = self.primary
        return VLLMServer(
            list(urls),
            base_version=base,
            timeout_s=p.timeout_s,
            max_loras=p.max_loras,
            api_key=p.api_key,
        )

    def _others(self) -> dict[str, list[str]]:
        """Each other base with its URLs: configured, then recorded (launched)."""
        found = {at.base: list(at.urls) for at in read_served(self.store, self.trust).values()}
        return {**found, **self.bases}

    def load(self, version: str, path: str) -> None:
        """Serve ``version`` at ``path``: an adapter on its base's server, a base of its own on
        its server (started by the launcher when none serves it).

        Raises:
            ModelServerError: no server serves its base and none can be started, or the
                server did not load it.
        """
        base = base_of(self.store, version, default=self.base_version)
        if base == self.base_version:
            self.primary.load(version, path)
            return
        urls = self._others().get(base)
        if urls is None:
            if self.launcher is None:
                raise ModelServerError(
                    f"no model server serves base model {base} ({version} runs on it; a "
                    f"distilled student is a base of its own): run one and name it in "
                    f"FLYWHEEL_MODEL_SERVER__BASES, or release from `flywheel run --server "
                    f"vllm`, which starts one"
                )
            if version != base:
                raise ModelServerError(f"base model {base} of {version} is not served")
            urls = self.launcher.start(base, path)
            log.info("started a model server for base %s", base)
        if version != base:
            self._server(base, urls).load(version, path)
        at = ServedAt(base, tuple(urls))
        record_served(self.store, {base: at, version: at}, self.trust)

    def unload(self, version: str) -> None:
        """Stop serving ``version``: an adapter is unloaded from its base's server; a base of
        its own is forgotten, its launched server stopped, once no other version runs on it
        (the configured base model is never unloaded)."""
        served = read_served(self.store, self.trust)
        at = served.get(version)
        if at is None:
            self.primary.unload(version)
            return
        if version != at.base:
            self._server(at.base, at.urls).unload(version)
            record_served(self.store, {version: None}, self.trust)
            return
        if any(v != version and a.base == version for v, a in served.items()):
            log.info("base %s kept: versions still run on it", version)
            return
        if self.launcher is not None and version in self.launcher.running():
            self.launcher.stop(version)
            log.info("stopped the model server of base %s", version)
        record_served(self.store, {version: None}, self.trust)

    def served(self) -> list[str]:
        """Versions served now, on every base's server."""
        out = set(self.primary.served())
        for base, urls in self._others().items():
            out |= set(self._server(base, urls).served())
        return sorted(out)

    def refusal(self, version: str, max_loras: int) -> str | None:
        """Why ``version`` cannot be loaded within ``max_loras`` adapters on its base's server
        (a base of its own takes no adapter slot); None when it can."""
        from infra.serving.model_server import capacity_refusal

        base = base_of(self.store, version, default=self.base_version)
        if base == version and version != self.base_version:
            return None
        if base == self.base_version:
            return capacity_refusal(self.primary, version, max_loras)
        urls = self._others().get(base)
        return (
            None if urls is None else capacity_refusal(self._server(base, urls), version, max_loras)
        )

    def health(self) -> str | None:
        """None when every base's server is healthy, else why not."""
        for base, urls in [(self.base_version, self.primary.urls), *self._others().items()]:
            if (why := self._server(base, urls).health()) is not None:
                return why
        return None


def open_model_server(config: Settings, store: ObjectStore) -> BaseServers | None:
    """The configured model servers, one per base model (:mod:`infra.serving.base_servers`; the
    launcher of this process's ``flywheel run --server vllm``, if any), or None (``kind``
    none: versions are served in process)."""
    from infra.serving.model_server import VLLMServer

    settings = config.model_server
    if not settings.enabled:
        return None
    primary = VLLMServer(
        settings.urls,
        base_version=settings.base_version,
        timeout_s=settings.timeout_s,
        max_loras=settings.max_loras,
        api_key=config.model_server_key(),
    )
    return BaseServers(
        primary,
        store=store,
        trust=ServerTrust.from_settings(config),
        bases=settings.bases,
        launcher=current_launcher(),
    )
