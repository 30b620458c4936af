"""All flywheel exceptions in one flat module (one family, specific subclasses)."""

from __future__ import annotations


class FlywheelError(Exception):
    """Base of every error flywheel raises on purpose."""


class ConfigError(FlywheelError):
    """A setting is missing or inconsistent; the message says which and how to fix it."""


class MissingDependencyError(ConfigError):
    """An optional package, model or pipeline is not installed; the message says how to get it."""


class StoreError(FlywheelError):
    """The object store refused an operation for a reason that retrying will not fix."""


class TransientStoreError(StoreError):
    """A retriable object-store failure (throttling, timeout, connection reset, 5xx)."""


class ObjectNotFound(StoreError):
    """The key does not exist in the object store."""


class CatalogError(FlywheelError):
    """The Iceberg catalog or a table operation failed."""


class SourceError(FlywheelError):
    """A trace source failed to deliver a window."""


class TransientSourceError(SourceError):
    """A retriable trace-source failure (a page timed out, 5xx, rate limited)."""


class InvalidRecord(FlywheelError):
    """A record breaks the data contract; it is quarantined, never retried."""


class JudgeError(FlywheelError):
    """A judge call failed after its retries."""


class GateError(FlywheelError):
    """The release gate could not reach a decision (e.g. too few samples)."""


class ReleaseError(FlywheelError):
    """An invalid release transition or a failed rollout action."""


class UpstreamError(FlywheelError):
    """A model server behind the gateway failed or is unavailable."""


class MetricsError(FlywheelError):
    """Prometheus (or the gateway's ``/metrics``) did not answer a query usable for analysis."""
