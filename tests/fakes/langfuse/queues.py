"""The annotation-queue slice of the fake Langfuse (a mixin of
:class:`tests.fakes.langfuse.FakeLangfuseServer`), in Langfuse's public API shapes:
``GET /api/public/annotation-queues[/{queueId}]``, ``GET`` and ``POST
/api/public/annotation-queues/{queueId}/items`` (``objectId``, ``objectType`` TRACE /
OBSERVATION / SESSION, ``status`` PENDING / COMPLETED; page-based ``data`` + ``meta``)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from tests.fakes.langfuse.model import HTTPError, numbered_page, params, ts


class AnnotationQueues:
    """Queues created as a person does in the UI, items added through the API."""

    annotation_queues: dict[str, dict[str, Any]]
    queue_items: list[dict[str, Any]]
    _lock: threading.Lock

    def add_annotation_queue(self, name: str, *, queue_id: str | None = None) -> str:
        """Create an annotation queue (as a person does in the Langfuse UI); returns its id."""
        now = _now()
        qid = queue_id or f"q-{len(self.annotation_queues) + 1}"
        with self._lock:
            self.annotation_queues[qid] = {
                "id": qid,
                "name": name,
                "description": None,
                "scoreConfigIds": [],
                "createdAt": now,
                "updatedAt": now,
            }
        return qid

    def complete_item(self, object_id: str) -> None:
        """A reviewer finished the queue item of ``object_id``."""
        now = _now()
        with self._lock:
            for item in self.queue_items:
                if item["objectId"] == object_id:
                    item.update(status="COMPLETED", completedAt=now, updatedAt=now)

    # -- routes -----------------------------------------------------------------------------
    def queues_list(self, q: dict[str, list[str]], body: Any) -> dict[str, Any]:
        """``GET /api/public/annotation-queues``."""
        return numbered_page(list(self.annotation_queues.values()), params(q, {"page", "limit"}))

    def queue_get(self, q: dict[str, list[str]], body: Any, qid: str) -> dict[str, Any]:
        """``GET /api/public/annotation-queues/{queueId}``."""
        return self._queue(qid)

    def queue_items_list(self, q: dict[str, list[str]], body: Any, qid: str) -> dict[str, Any]:
        """``GET /api/public/annotation-queues/{queueId}/items``."""
        self._queue(qid)
        p = params(q, {"page", "limit", "status"})
        if p.get("status", "PENDING") not in ("PENDING", "COMPLETED"):
            raise HTTPError(400, "Invalid request data: status")
        with self._lock:
            items = [
                i
                for i in self.queue_items
                if i["queueId"] == qid and p.get("status") in (None, i["status"])
            ]
        return numbered_page(items, p)

    def queue_item_add(self, q: dict[str, list[str]], body: Any, qid: str) -> dict[str, Any]:
        """``POST /api/public/annotation-queues/{queueId}/items``."""
        self._queue(qid)
        if not isinstance(body, dict) or set(body) - {"objectId", "objectType", "status"}:
            raise HTTPError(400, "Invalid request data: unrecognized keys")
        if not isinstance(body.get("objectId"), str):
            raise HTTPError(400, "Invalid request data: objectId is required")
        if body.get("objectType") not in ("TRACE", "OBSERVATION", "SESSION"):
            raise HTTPError(400, "Invalid request data: objectType")
        status = body.get("status", "PENDING")
        if status not in ("PENDING", "COMPLETED"):
            raise HTTPError(400, "Invalid request data: status")
        now = _now()
        with self._lock:
            item = {
                "id": f"item-{len(self.queue_items) + 1}",
                "queueId": qid,
                "objectId": body["objectId"],
                "objectType": body["objectType"],
                "status": status,
                "completedAt": now if status == "COMPLETED" else None,
                "createdAt": now,
                "updatedAt": now,
            }
            self.queue_items.append(item)
        return item

    def _queue(self, qid: str) -> dict[str, Any]:
        if qid not in self.annotation_queues:
            raise HTTPError(404, "Annotation queue not found")
        return self.annotation_queues[qid]


def _now() -> str | None:
    return ts(datetime.now(UTC))
