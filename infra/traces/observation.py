"""A Langfuse observation as the trace source reads it: the fields of Langfuse's public API
(``GET /api/public/v2/observations``, the SDK's ``ObservationV2`` dumped as JSON; the v1
``GET /api/public/traces/{id}`` observations) that :mod:`infra.traces.mapping` and
:mod:`infra.traces.otel` read, plus the window time the reader adds."""

from __future__ import annotations

from typing import Any, Required, TypedDict, cast

from infra.traces.conversation import JsonObject


class Observation(TypedDict, total=False):
    """One observation of a trace (a GENERATION, SPAN, TOOL, RETRIEVER, ...), as Langfuse's
    public API answers it: camelCase keys, times as ISO strings, keys without a value left
    out. ``input``/``output``/``modelParameters`` are whatever the instrumentation recorded
    (arbitrary JSON; v2 returns them as raw JSON text), ``metadata`` an object whose values,
    or itself, may be JSON text. ``_windowTime`` is the reader's: the time the server filtered
    the window on (v2 the observation's start, v1 its trace's timestamp)."""

    id: Required[str]
    traceId: str | None
    type: str
    name: str | None
    startTime: str
    endTime: str | None
    parentObservationId: str | None
    isRootObservation: bool | None  # v2 only
    level: str
    version: str | None
    model: str | None
    userId: str | None
    sessionId: str | None
    input: Any
    output: Any
    metadata: JsonObject | str
    modelParameters: Any
    usageDetails: dict[str, int]
    usage: JsonObject  # v1: input, output, total, unit
    latency: float | None
    _windowTime: str | None


def observation(raw: JsonObject, *, window_time: Any) -> Observation:
    """One observation as Langfuse's API answered it, with the reader's ``_windowTime``."""
    # the trust boundary: Langfuse's public API JSON, whose documented shape Observation is (the
    # SDK validated a v2 page; every key is read with .get, so an absent one reads as None)
    return cast("Observation", {**raw, "_windowTime": window_time})
