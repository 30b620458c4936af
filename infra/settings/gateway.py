"""The gateway's settings (``FLYWHEEL_GATEWAY__*``): its two listeners, its limits and the
OpenAI-compatible upstreams it forwards to, with where each upstream's key is."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, field_validator

from infra.errors import ConfigError


class UpstreamSettings(BaseModel):
    """One OpenAI-compatible upstream of ``FLYWHEEL_GATEWAY__UPSTREAMS`` with a key: ``url``
    (the ``/v1`` base URL) and where its key is (an environment variable or a secret file; the
    key itself is never a setting, never logged, never traced)."""

    url: str
    api_key_env: str | None = None
    api_key_file: Path | None = None

    def api_key(self) -> str | None:
        """The key (None: the upstream takes none).

        Raises:
            ConfigError: the variable is unset or empty, or the file cannot be read.
        """
        if self.api_key_env:
            key = os.environ.get(self.api_key_env, "").strip()
            if not key:
                raise ConfigError(f"the upstream key variable {self.api_key_env} is not set")
            return key
        if self.api_key_file is not None:
            try:
                key = self.api_key_file.read_text().strip()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read the upstream key file {self.api_key_file}: {exc.strerror}"
                ) from None
            if not key:
                raise ConfigError(f"the upstream key file {self.api_key_file} is empty")
            return key
        return None


class GatewaySettings(BaseModel):
    """The OpenAI-compatible gateway. Two listeners: the public one (``host:port``: chat,
    feedback, models, health, metrics of the versions users reach) and the admin one
    (``admin_host:admin_port``: the ``/admin`` API with its bearer token, the Alertmanager
    webhook, every metric at ``/admin/metrics``, the OpenAPI schema)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8088, ge=0, le=65535)
    admin_host: str = "127.0.0.1"
    admin_port: int = Field(default=8089, ge=0, le=65535)
    admin_token: SecretStr | None = None  # unset: admin API off; else >= 32 characters
    url: str | None = None  # where flows and the simulator reach the gateway (public listener)
    admin_url: str | None = (
        None  # where flows reach the admin API (default: url's host, admin_port)
    )
    # model version -> OpenAI-compatible base URL, or {"url", "api_key_env" | "api_key_file"}
    upstreams: dict[str, str | UpstreamSettings] = {}
    diverse_fraction: float = 0.3
    diverse_temperatures: list[float] = [0.7, 0.9, 1.1]
    trace_queue_size: int = 10_000
    # and in bytes of the records' JSON (a trace weighs up to 10 x max_trace_chars)
    trace_queue_bytes: int = Field(default=256 * 2**20, ge=2**20)
    max_new_tokens: int = 16  # the in-process model's budget when a client names none
    # the in-process model's most per answer, whatever a client asks: it decodes on this
    # machine's CPU, batched with other users' requests (max_tokens_limit is the HTTP servers')
    local_max_tokens: int = Field(default=512, ge=1)
    # the in-process model answers concurrent requests together: at most this many per forward
    # pass, the first waiting at most local_batch_wait_ms for company (1: one at a time)
    local_batch_size: int = Field(default=16, ge=1, le=256)
    local_batch_wait_ms: float = Field(default=5.0, ge=0, le=1000)
    max_tokens_limit: int = Field(default=8192, ge=1)  # a client's max_tokens is clamped to it
    max_messages: int = Field(default=1024, ge=1)  # more messages in one request: 400
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)  # larger requests get 413
    # text fields of a trace are each cut to this; the whole serialised record to 10x this
    max_trace_chars: int = Field(default=32_000, ge=100)
    upstream_connections: int = Field(default=512, ge=1)  # per upstream server
    # one upstream call: the wait for a connection, the connect, the answer, a whole stream
    upstream_timeout_s: float = Field(default=120.0, gt=0)
    stall_timeout_s: float = Field(default=30.0, gt=0)  # a stream's client reads nothing: dropped
    # the public listener: connections and requests at once (beyond: 503), request heads
    max_connections: int = Field(default=2048, ge=1)
    # of those, open at once from one peer address (beyond: 503), so one client cannot take
    # every slot; 0: no cap (behind a reverse proxy every client is the proxy's address)
    max_connections_per_client: int = Field(default=256, ge=0)
    max_header_bytes: int = Field(default=32 * 1024, ge=1024)
    header_timeout_s: float = Field(default=10.0, gt=0)
    # from the end of a request's head to the end of its body, on both listeners: a body not
    # complete by then gets 408 and its connection closed (a client stalling in its body
    # would hold its connection slot forever); 30 s is 4 MiB at 140 KB/s
    body_timeout_s: float = Field(default=30.0, gt=0)
    # an idle keep-alive connection is closed after this. Longer than the clients' own idle
    # expiry (httpx and the openai SDK: 5 s; load balancers: 60 s): were the gateway to close
    # first, a client reusing the connection as it closes gets a reset for a request it sent
    # (uvicorn's default, 5 s, met httpx's 5 s under load). nginx's default is 75 s
    keep_alive_s: float = Field(default=75.0, gt=0)
    # worker processes behind the listeners (`flywheel gateway`); metrics aggregated over all
    workers: int = Field(default=1, ge=1, le=64)
    # the canary's tests count users, not events: each user's first N requests, errors and
    # votes per release step (infra/gateway/voices.py)
    voices_per_step: int = Field(default=1, ge=1)
    # a request without ``user`` or session is routed and counted by its client's address:
    # the connection's peer, or, when that peer is one of these proxies (addresses or CIDRs),
    # the rightmost address in client_header that is not itself a trusted proxy
    # (infra/gateway/requester.py). Empty: every peer is its own client, headers ignored
    trusted_proxies: list[str] = []
    # client API keys (infra/client_keys.py, `flywheel keys`): once one is created the public
    # listener serves only callers showing an active one; require_keys refuses every caller
    # while none exists (no open mode even before the first key)
    require_keys: bool = False
    # while more than one key is active: the users who met an error and the votes one key
    # adds per version and release step when the other keys' users served are fewer (its
    # allowance is the larger of the two; a key's own max_voices overrides it; 0: no cap)
    key_voices_per_step: int = Field(default=5, ge=0)
    # image, audio, video and file content parts: refused (400) unless allowed, and then only
    # inline ``data:`` URLs unless a URL starts with one of media_url_prefixes (a model
    # server fetches such URLs from inside the network)
    allow_media: bool = False
    media_url_prefixes: list[str] = []
    client_header: str = Field(default="X-Forwarded-For", pattern=r"^[A-Za-z0-9-]+$")

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or CIDR network") from None
        return value

    def upstream(self, version: str) -> UpstreamSettings | None:
        """``version``'s configured upstream (a bare URL entry is one without a key)."""
        entry = self.upstreams.get(version)
        return UpstreamSettings(url=entry) if isinstance(entry, str) else entry

    def metrics_source(
        self, public_url: str | None = None, *, admin_url: str | None = None
    ) -> tuple[str | None, str | None]:
        """Where the embedded readers scrape every series: the admin listener's URL
        (``admin_url``, else the configured ``FLYWHEEL_GATEWAY__ADMIN_URL``, else that of the
        gateway at ``public_url``, default ``url``, on ``admin_port``) and the admin token
        (None: unknown)."""
        token = self.admin_token.get_secret_value() if self.admin_token else None
        admin_url = admin_url or self.admin_url
        if admin_url:
            return admin_url.rstrip("/"), token
        if public_url and public_url.rstrip("/") != (self.url or "").rstrip("/"):
            admin = self.model_copy(update={"url": public_url, "admin_url": None})
            return admin.resolved_admin_url, token
        return self.resolved_admin_url, token

    @property
    def resolved_admin_url(self) -> str | None:
        """``admin_url``, else ``url`` with its port replaced by ``admin_port``, else None."""
        if self.admin_url:
            return self.admin_url.rstrip("/")
        if not self.url:
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(self.url)
        host = parts.hostname or "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return f"{parts.scheme or 'http'}://{host}:{self.admin_port}"
