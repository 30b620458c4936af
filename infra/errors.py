"""All flywheel exceptions in one flat module (one family, specific subclasses)."""

from __future__ import annotations

from typing import Any


class FlywheelError(Exception):
    """Base of every error flywheel raises on purpose."""


class TransientError(FlywheelError):
    """A failure that a retry may cure (timeout, throttling, 5xx, a lost commit race). The
    adapters (store, trace source, catalog, LLM endpoints) raise a subclass of it; the one retry
    policy (:mod:`infra.retries`) retries exactly these and nothing else.

    ``retry_after_s`` is the wait the server asked for (HTTP ``Retry-After``), when it said."""

    retry_after_s: float | None = None


class ConfigError(FlywheelError):
    """A setting is missing or inconsistent; the message says which and how to fix it."""


class MissingDependencyError(ConfigError):
    """An optional package, model or pipeline is not installed; the message says how to get it."""


class UnknownWorkload(ConfigError):
    """A workload named by an operator (``--workload``, a flow parameter) that
    ``FLYWHEEL_WORKLOADS`` does not list; nothing was done (the CLI exits 2)."""


class StoreError(FlywheelError):
    """The object store refused an operation for a reason that retrying will not fix."""


class TransientStoreError(StoreError, TransientError):
    """A retriable object-store failure (throttling, timeout, connection reset, 5xx)."""


class ObjectNotFound(StoreError):
    """The key does not exist in the object store."""


class PreconditionFailed(StoreError):
    """A conditional write found the object changed (or present) since it was read."""


class CatalogError(FlywheelError):
    """The Iceberg catalog or a table operation failed."""


class TransientCatalogError(CatalogError, TransientError):
    """A commit lost a race with a concurrent writer (pyiceberg ``CommitFailedException``)."""


class SourceError(FlywheelError):
    """A trace source failed to deliver a window."""


class TransientSourceError(SourceError, TransientError):
    """A retriable trace-source failure (a page timed out, 5xx, rate limited)."""


class SourceRateLimited(TransientSourceError):
    """The source answered HTTP 429 (rate limited); ``retry_after_s`` is the wait it asked for.
    The server did no work, so even a non-idempotent request may be sent again."""


class SourceUnavailable(SourceError):
    """The source answered HTTP 404/501: the endpoint is switched off or missing on this server
    (or the object is gone: ``not_found``). The Langfuse reader falls back to an older API on
    it."""

    def __init__(self, what: str, status: int) -> None:
        super().__init__(
            f"Langfuse answered HTTP {status} to the {what} request (not on this server)"
        )
        self.status = status
        # the server said the object is not there (Langfuse's 404 body names the error
        # ``LangfuseNotFoundError``), rather than that the endpoint is off or missing
        self.not_found = False


class JudgeError(FlywheelError):
    """A judge call failed after its retries."""


class InsufficientTraffic(FlywheelError):
    """An ablation's shared traffic holds too little training data (``flywheel prove``)."""


class ReleaseError(FlywheelError):
    """An invalid release transition or a failed rollout action."""


class StateConflict(ReleaseError, TransientError):
    """The routing state changed since it was read; reload, reapply, write again."""


class ControlRefused(ReleaseError):
    """A release request or a person's control was refused before it changed anything (the
    version cannot be served, was rejected, the gate did not pass, nothing to pause ...): the
    operator can fix the request; the CLI exits 2."""


class RejectedVersion(ControlRefused):
    """The version was rejected before; only a person may release it again (``force``)."""


class UnservableVersion(ControlRefused):
    """A model version that nothing can serve (not a complete version in the store, no
    upstream configured for it) was named where traffic would go to it."""


class ReleaseInterrupted(ControlRefused):
    """A person asked for a transition the release is not (any more) in a phase for (e.g.
    promote with no candidate); ``state`` is the routing state found (an
    :class:`infra.routing.RoutingState`: this module is the bottom of the house and imports
    nothing of flywheel)."""

    def __init__(self, message: str, state: Any) -> None:
        super().__init__(message)
        self.state = state


class GatewayUnavailable(ReleaseError, TransientError):
    """The gateway's admin API did not answer, or answered with a 5xx."""


class UpstreamError(FlywheelError):
    """A model server behind the gateway failed or is unavailable."""


class MetricsError(FlywheelError):
    """Prometheus (or the gateway's ``/metrics``) did not answer a query usable for analysis."""


class ReviewFileError(FlywheelError, ValueError):
    """A review file a person filled in is malformed (line and column named); nothing of it
    was imported; the CLI exits 2."""


class ModelServerError(ReleaseError):
    """A model server (vLLM) refused or failed to load, unload or list an adapter: the release
    is held with this message as its reason."""


class PrivacyCheckFailed(FlywheelError):
    """A privacy check stopped a run before it wrote or trained anything: a curate run whose
    canary values survived anonymisation (nothing committed), or a weekly run whose last
    day's canary recall is below the bar (nothing trained). The message says which types
    and how far below; a failed run (the CLI exits 1)."""


def redact_url(url: str) -> str:
    """``scheme://host:port`` of ``url``, for a log or an error message: a configured URL may
    carry credentials (``http://user:password@host``) or a token in its query, which never
    belong in either."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "<invalid URL>"
    return f"{parts.scheme}://{parts.hostname}{f':{port}' if port else ''}"
