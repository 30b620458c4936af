"""What every flow needs at start: settings, the object store, the catalog, the trace source,
and stage reporting (metrics pushed whatever the outcome)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from infra.metrics.stage import StageReport, publish
from infra.settings import Settings, get_settings
from infra.store import ObjectStore, open_store

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.traces import TraceSource


@dataclass
class Runtime:
    """Adapters built from settings; flows build one and hand explicit values to tasks."""

    settings: Settings

    @classmethod
    def from_env(cls) -> Runtime:
        """A runtime on the process-wide settings (``FLYWHEEL_*`` variables and ``.env``)."""
        return cls(get_settings())

    @cached_property
    def store(self) -> ObjectStore:
        """The object store, opened on first use."""
        return open_store(self.settings)

    @cached_property
    def catalog(self) -> Catalog:
        """The Iceberg catalog, opened on first use."""
        from infra.catalog import open_catalog

        return open_catalog(self.settings)

    def trace_source(self) -> TraceSource:
        """Where collect reads traces: Langfuse or the gateway's spool in the store
        (``trace_source``)."""
        if self.settings.trace_source == "langfuse":
            from infra.traces.langfuse_reader import LangfuseSource

            return LangfuseSource.from_settings(self.settings)
        from infra.traces import SpoolSource

        return SpoolSource(
            self.store,
            max_record_bytes=self.settings.max_record_bytes,
            lookahead_hours=self.settings.feedback_lookahead_hours,
        )

    @contextmanager
    def reporting(self, stage: str) -> Iterator[StageReport]:
        """Yields the stage's report; publishes it with success/failure and duration."""
        report = StageReport(stage)
        started = time.monotonic()
        status = "failure"
        try:
            yield report
            status = "success"
        finally:
            publish(
                report,
                store=self.store,
                status=status,
                duration_s=time.monotonic() - started,
                pushgateway_url=self.settings.pushgateway_url,
            )
