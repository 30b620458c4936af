"""A fake Langfuse server for tests, following the real server's public API (see
:mod:`tests.fakes.langfuse.server`)."""

from tests.fakes.langfuse.model import FakeObservation, FakeScore, FakeTrace, ts
from tests.fakes.langfuse.server import FakeLangfuseServer

__all__ = ["FakeLangfuseServer", "FakeObservation", "FakeScore", "FakeTrace", "ts"]
