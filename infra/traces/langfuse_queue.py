"""Langfuse annotation queues (production human review) through the public API:
``GET /api/public/annotation-queues/{queueId}/items`` (page-based) and
``POST /api/public/annotation-queues/{queueId}/items`` with ``{"objectId": <trace id>,
"objectType": "TRACE"}``. The queue itself (and its score configs) is created by a person in
the Langfuse UI; its id is ``FLYWHEEL_REVIEW__LANGFUSE_QUEUE_ID``. Reviewers' labels are
Langfuse scores on the trace."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, TypedDict
from urllib.parse import quote

from infra.errors import SourceError, SourceUnavailable
from infra.traces.langfuse_http import LangfuseHttp

log = logging.getLogger(__name__)


class QueueItem(TypedDict, total=False):
    """One item of an annotation queue, as Langfuse's public API lists it
    (``AnnotationQueueItem``: times as ISO strings)."""

    id: str
    queueId: str
    objectId: str
    objectType: str  # TRACE | OBSERVATION | SESSION
    status: str  # PENDING | COMPLETED
    completedAt: str | None
    createdAt: str
    updatedAt: str


class LangfuseReviewQueue(LangfuseHttp):
    """One annotation queue; every request retried by the shared policy (a 429's
    ``Retry-After`` honoured)."""

    ROLE = "review queue"

    def __init__(self, *, queue_id: str, **connection: Any) -> None:
        super().__init__(**connection)
        self.path = f"api/public/annotation-queues/{quote(queue_id, safe='')}/items"

    def _call(self, what: str, method: str, **kwargs: Any) -> dict[str, Any]:
        try:
            return self.send(f"annotation queue {what}", method, self.path, **kwargs)
        except SourceUnavailable as exc:
            raise SourceError(
                f"Langfuse annotation queue answered {exc.status} to {method} items (check "
                "FLYWHEEL_REVIEW__LANGFUSE_QUEUE_ID and the API keys)"
            ) from None

    def items(self, *, status: str | None = None) -> list[QueueItem]:
        """Every item of the queue (``status``: PENDING or COMPLETED only)."""
        out: list[QueueItem] = []  # each page's ``data``, as the API answered it
        page = 1
        while True:
            params: dict[str, Any] = {"page": page, "limit": self.limit()}
            if status:
                params["status"] = status
            body = self._call("items page", "GET", params=params)
            out += body.get("data") or []
            if page >= int((body.get("meta") or {}).get("totalPages") or 0):
                return out
            page += 1

    def add_traces(self, trace_ids: Iterable[str]) -> int:
        """Queue the traces not already in the queue; returns how many were added."""
        present = {i["objectId"] for i in self.items() if i.get("objectType") == "TRACE"}
        added = 0
        for trace_id in dict.fromkeys(trace_ids):
            if trace_id in present:
                continue
            body = {"objectId": trace_id, "objectType": "TRACE"}
            self._call("item", "POST", json=body, idempotent=False)  # no duplicate items
            added += 1
        log.info("annotation queue: %d traces added, %d already queued", added, len(present))
        return added
