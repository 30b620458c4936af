"""The fake Langfuse's read endpoints, in the real server's shapes and checks:
``GET /api/public/v2/observations`` (keyset cursor pages, field groups, io as raw strings,
metadata truncated at 200 characters unless expanded, filters by user, trace, type, root and
start time), ``/api/public/v3/scores`` (cursor pages, ``subject`` field group), and the
deprecated page-based ``/api/public/traces``, ``/api/public/traces/{id}`` and
``/api/public/v2/scores``. A list that no id filter nor start time narrows answers 422 (see
:func:`~tests.fakes.langfuse.model.narrowed`); a trace that is not there answers 404 with
``error: LangfuseNotFoundError``; a trace may have no observations (a score on it is all
Langfuse holds)."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.langfuse.model import (
    NOT_FOUND,
    PAGE_MAX,
    V2_OBSERVATIONS_MAX,
    FakeObservation,
    FakeScore,
    FakeTrace,
    HTTPError,
    in_range,
    integer,
    keyset_page,
    narrowed,
    numbered_page,
    params,
    ts,
)

V2_GROUPS = {
    "core": ("id", "traceId", "startTime", "endTime", "projectId", "parentObservationId", "type"),
    "basic": (
        "name",
        "level",
        "statusMessage",
        "version",
        "environment",
        "bookmarked",
        "public",
        "userId",
        "sessionId",
        "isRootObservation",
    ),
    "time": ("completionStartTime", "createdAt", "updatedAt"),
    "io": ("input", "output"),
    "metadata": ("metadata",),
    "model": ("model", "internalModelId", "modelParameters"),
    "usage": ("usageDetails", "costDetails", "totalCost", "usagePricingTierName"),
    "prompt": ("promptId", "promptName", "promptVersion"),
    "metrics": ("latency", "timeToFirstToken"),
    "trace_context": ("tags", "release", "traceName"),
}
V2_OBS_PARAMS = {
    "fields",
    "expandMetadata",
    "limit",
    "cursor",
    "parseIoAsJson",
    "name",
    "userId",
    "sessionId",
    "type",
    "traceId",
    "level",
    "parentObservationId",
    "isRootObservation",
    "environment",
    "fromStartTime",
    "toStartTime",
    "version",
    "filter",
}
V3_SCORE_PARAMS = {
    "limit",
    "cursor",
    "fields",
    "id",
    "name",
    "source",
    "dataType",
    "environment",
    "configId",
    "queueId",
    "authorUserId",
    "value",
    "valueMin",
    "valueMax",
    "traceId",
    "sessionId",
    "observationId",
    "experimentId",
    "fromTimestamp",
    "toTimestamp",
}
V2_SCORE_PARAMS = {
    "page",
    "limit",
    "userId",
    "name",
    "fromTimestamp",
    "toTimestamp",
    "source",
    "operator",
    "value",
    "scoreIds",
    "configId",
    "queueId",
    "dataType",
    "traceTags",
    "environment",
    "traceId",
    "sessionId",
    "observationId",
}
V1_TRACE_PARAMS = {
    "page",
    "limit",
    "userId",
    "name",
    "sessionId",
    "fromTimestamp",
    "toTimestamp",
    "orderBy",
    "tags",
    "version",
    "release",
    "environment",
    "fields",
}


def observations_v2(q: dict[str, list[str]], traces: list[FakeTrace]) -> dict[str, Any]:
    """``GET /api/public/v2/observations``."""
    p = params(q, V2_OBS_PARAMS)
    narrowed(p, ("traceId", "userId", "sessionId"), "fromStartTime")
    groups = {"core", *(g for g in p.get("fields", "core,basic").split(",") if g)}
    if groups - set(V2_GROUPS):
        raise HTTPError(
            400, f"Invalid request data: unknown field groups {sorted(groups - set(V2_GROUPS))}"
        )
    if p.get("parseIoAsJson") == "true":
        raise HTTPError(400, "parseIoAsJson is deprecated; input/output are returned as strings")
    limit = integer(p, "limit", 50, 1, V2_OBSERVATIONS_MAX)
    expand = set(p.get("expandMetadata", "").split(","))
    root = {"true": True, "false": False}.get(p.get("isRootObservation", ""))
    rows = [
        (t, o)
        for t in traces
        for o in t.observations
        if in_range(o.start_time, p, "fromStartTime", "toStartTime")
        and p.get("type", o.type) == o.type
        and p.get("traceId", o.trace_id) == o.trace_id
        and ("userId" not in p or p["userId"] == t.user_id)
        and (root is None or root == (o.parent_id is None))
    ]
    rows.sort(key=_obs_key, reverse=True)
    page, cursor = keyset_page(rows, p, limit, _obs_key)
    keys = {k for g in groups for k in V2_GROUPS[g]}
    data = [{k: v for k, v in _obs_v2(t, o, expand).items() if k in keys} for t, o in page]
    return {"data": data, "meta": {"cursor": cursor} if cursor else {}}


def _obs_key(row: tuple[FakeTrace, FakeObservation]) -> tuple[str, str]:
    return (ts(row[1].start_time) or "", row[1].id)


def _raw(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else json.dumps(value)


def _obs_v2(t: FakeTrace, o: FakeObservation, expand: set[str]) -> dict[str, Any]:
    meta = {k: v if isinstance(v, str) else json.dumps(v) for k, v in o.metadata.items()}
    meta = {k: v if k in expand else v[:200] for k, v in meta.items()}
    return {
        **_obs_v1(o),
        "projectId": "proj-fake",
        "environment": "default",
        "bookmarked": False,
        "public": False,
        "userId": t.user_id,
        "sessionId": t.session_id,
        "isRootObservation": o.parent_id is None,
        "input": o.input if isinstance(o.input, str) else _raw(o.input),
        "output": o.output if isinstance(o.output, str) else _raw(o.output),
        "metadata": meta,
        "internalModelId": None,
        "costDetails": {},
        "totalCost": 0.0,
    }


def _obs_v1(o: FakeObservation) -> dict[str, Any]:
    latency = (o.end_time - o.start_time).total_seconds() if o.end_time else None
    usage = o.usage or {}
    return {
        "id": o.id,
        "traceId": o.trace_id,
        "type": o.type,
        "name": o.name,
        "startTime": ts(o.start_time),
        "endTime": ts(o.end_time),
        "completionStartTime": None,
        "createdAt": ts(o.start_time),
        "updatedAt": ts(o.end_time or o.start_time),
        "model": o.model,
        "modelParameters": o.model_parameters,
        "input": o.input,
        "output": o.output,
        "metadata": o.metadata,
        "level": o.level,
        "statusMessage": None,
        "parentObservationId": o.parent_id,
        "version": o.version,
        "usageDetails": usage,
        "usage": {**{k: usage.get(k) for k in ("input", "output", "total")}, "unit": "TOKENS"},
        "latency": latency,
        "timeToFirstToken": None,
    }


def _trace_v1(t: FakeTrace, scores: list[FakeScore], *, full: bool) -> dict[str, Any]:
    root = next((o for o in t.observations if o.parent_id is None), None)
    root = root or (t.observations[0] if t.observations else None)
    end = max((o.end_time or o.start_time for o in t.observations), default=t.timestamp)
    own = [s for s in scores if s.trace_id == t.id]
    return {
        "id": t.id,
        "timestamp": ts(t.timestamp),
        "name": root.name if root else None,
        "input": root.input if root else None,
        "output": root.output if root else None,
        "sessionId": t.session_id,
        "userId": t.user_id,
        "metadata": t.metadata,
        "tags": [],
        "public": False,
        "environment": "default",
        "release": None,
        "version": None,
        "htmlPath": f"/project/proj-fake/traces/{t.id}",
        "latency": (end - t.timestamp).total_seconds(),
        "totalCost": 0.0,
        "observations": [_obs_v1(o) for o in t.observations]
        if full
        else [o.id for o in t.observations],
        "scores": [_score_v2(s) for s in own] if full else [s.id for s in own],
    }


def trace_v1(
    q: dict[str, list[str]], traces: list[FakeTrace], scores: list[FakeScore], tid: str
) -> dict[str, Any]:
    """``GET /api/public/traces/{traceId}``."""
    params(q, {"fields"})
    match = [t for t in traces if t.id == tid]
    if not match:
        raise HTTPError(404, f"Trace {tid} not found within authorized project", error=NOT_FOUND)
    return _trace_v1(match[0], scores, full=True)


def traces_v1(
    q: dict[str, list[str]], traces: list[FakeTrace], scores: list[FakeScore]
) -> dict[str, Any]:
    """``GET /api/public/traces`` (page-based, ``limit`` at most 100)."""
    p = params(q, V1_TRACE_PARAMS)
    narrowed(p, ("userId", "sessionId"), "fromTimestamp")
    if p.get("orderBy", "timestamp.desc") not in ("timestamp.asc", "timestamp.desc"):
        raise HTTPError(400, "Invalid request data: orderBy")
    rows = sorted(
        (
            t
            for t in traces
            if in_range(t.timestamp, p, "fromTimestamp", "toTimestamp")
            and ("userId" not in p or p["userId"] == t.user_id)
        ),
        key=lambda t: (t.timestamp, t.id),
        reverse=p.get("orderBy") != "timestamp.asc",
    )
    body = numbered_page(rows, p)
    body["data"] = [_trace_v1(t, scores, full=False) for t in body["data"]]
    return body


def _score_core(s: FakeScore) -> dict[str, Any]:
    return {
        "id": s.id,
        "projectId": "proj-fake",
        "name": s.name,
        "value": s.value,
        "dataType": s.data_type,
        "source": "API",
        "timestamp": ts(s.timestamp),
        "environment": "default",
        "createdAt": ts(s.timestamp),
        "updatedAt": ts(s.timestamp),
    }


def _score_v2(s: FakeScore) -> dict[str, Any]:
    body = {**_score_core(s), "traceId": s.trace_id, "observationId": None, "comment": s.comment}
    body["sessionId"] = s.session_id
    if s.data_type == "BOOLEAN":
        body.update(value=1.0 if s.value else 0.0, stringValue="True" if s.value else "False")
    return body


def _matching_scores(p: dict[str, str], scores: list[FakeScore]) -> list[FakeScore]:
    names = set(p["name"].split(",")) if p.get("name") else None
    rows = [
        s
        for s in scores
        if (names is None or s.name in names)
        and (not p.get("traceId") or s.trace_id == p["traceId"])
        and in_range(s.timestamp, p, "fromTimestamp", "toTimestamp")
    ]
    return sorted(rows, key=_score_key, reverse=True)


def scores_v3(q: dict[str, list[str]], scores: list[FakeScore]) -> dict[str, Any]:
    """``GET /api/public/v3/scores`` (cursor pages, ``limit`` at most 100)."""
    p = params(q, V3_SCORE_PARAMS)
    groups = {g for g in p.get("fields", "").split(",") if g}
    if groups - {"details", "subject", "annotation"}:
        raise HTTPError(400, "Invalid request data: unknown field groups")
    limit = integer(p, "limit", 50, 1, PAGE_MAX)
    page, cursor = keyset_page(_matching_scores(p, scores), p, limit, _score_key)
    data = []
    for s in page:
        item = _score_core(s)
        if "subject" in groups:  # a session's score names the session, not a trace
            item["subject"] = (
                {"kind": "trace", "id": s.trace_id}
                if s.trace_id
                else {"kind": "session", "id": s.session_id}
            )
        if "details" in groups:
            item.update(comment=s.comment, configId=None, metadata={})
        data.append(item)
    return {"data": data, "meta": {"limit": limit, **({"cursor": cursor} if cursor else {})}}


def scores_v2(q: dict[str, list[str]], scores: list[FakeScore]) -> dict[str, Any]:
    """``GET /api/public/v2/scores`` (page-based, ``limit`` at most 100)."""
    p = params(q, V2_SCORE_PARAMS)
    body = numbered_page(_matching_scores(p, scores), p)
    body["data"] = [_score_v2(s) for s in body["data"]]
    return body


def _score_key(s: FakeScore) -> tuple[str, str]:
    return (ts(s.timestamp) or "", s.id)
