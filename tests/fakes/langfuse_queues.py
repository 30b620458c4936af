"""The annotation-queue slice of the fake Langfuse server (a mixin of
:class:`tests.fakes.langfuse_server.FakeLangfuseServer`), in Langfuse's public API shapes:
``GET /api/public/annotation-queues[/{queueId}]``, ``GET`` and ``POST
/api/public/annotation-queues/{queueId}/items`` (``objectId``, ``objectType`` TRACE /
OBSERVATION / SESSION, ``status`` PENDING / COMPLETED; page-based ``data`` + ``meta``)."""

from __future__ import annotations

import base64
import math
import threading
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote


class AnnotationQueues:
    public_key: str
    secret_key: str
    requests: list[tuple[str, dict[str, list[str]]]]
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

    def handle_post(self, path: str, body: Any, auth: str | None) -> tuple[int, Any]:
        """``POST /api/public/annotation-queues/{queueId}/items``."""
        with self._lock:
            self.requests.append((path, {}))
        expected = (
            "Basic " + base64.b64encode(f"{self.public_key}:{self.secret_key}".encode()).decode()
        )
        if auth != expected:
            return 401, {"message": "Invalid credentials."}
        parts = path.strip("/").split("/")
        if len(parts) != 5 or parts[:3] != ["api", "public", "annotation-queues"]:
            return 404, {"message": "Not found"}
        if parts[4] != "items":
            return 404, {"message": "Not found"}
        qid = unquote(parts[3])
        if qid not in self.annotation_queues:
            return 404, {"message": "Annotation queue not found"}
        if not isinstance(body, dict) or set(body) - {"objectId", "objectType", "status"}:
            return 400, {"message": "Invalid request data: unrecognized keys"}
        if not isinstance(body.get("objectId"), str):
            return 400, {"message": "Invalid request data: objectId is required"}
        if body.get("objectType") not in ("TRACE", "OBSERVATION", "SESSION"):
            return 400, {"message": "Invalid request data: objectType"}
        status = body.get("status", "PENDING")
        if status not in ("PENDING", "COMPLETED"):
            return 400, {"message": "Invalid request data: status"}
        now = _now()
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
        with self._lock:
            self.queue_items.append(item)
        return 200, item

    def _annotation_queues(self, path: str, q: dict[str, list[str]]) -> Any:
        parts = path.strip("/").split("/")
        if len(parts) == 3:
            p = _params(q, {"page", "limit"})
            return _page(list(self.annotation_queues.values()), p)
        qid = unquote(parts[3])
        if qid not in self.annotation_queues:
            raise _http_error(404, "Annotation queue not found")
        if len(parts) == 4:
            return self.annotation_queues[qid]
        if len(parts) == 5 and parts[4] == "items":
            p = _params(q, {"page", "limit", "status"})
            if p.get("status", "PENDING") not in ("PENDING", "COMPLETED"):
                raise _http_error(400, "Invalid request data: status")
            items = [
                i
                for i in self.queue_items
                if i["queueId"] == qid and p.get("status") in (None, i["status"])
            ]
            return _page(items, p)
        raise _http_error(404, "Not found")


def _now() -> str | None:
    from tests.fakes.langfuse_server import ts

    return ts(datetime.now(UTC))


def _http_error(status: int, message: str) -> Exception:
    from tests.fakes.langfuse_server import _HTTPError

    return _HTTPError(status, message)


def _params(q: dict[str, list[str]], allowed: set[str]) -> dict[str, str]:
    from tests.fakes.langfuse_server import _params as params

    return params(q, allowed)


def _page(items: list[Any], p: dict[str, str]) -> dict[str, Any]:
    """Langfuse's page-based envelope (``data`` + ``meta``)."""
    from tests.fakes.langfuse_server import _int

    limit = _int(p, "limit", 50, 1, 100)
    page = _int(p, "page", 1, 1, 10**6)
    return {
        "data": items[(page - 1) * limit : page * limit],
        "meta": {
            "page": page,
            "limit": limit,
            "totalItems": len(items),
            "totalPages": math.ceil(len(items) / limit),
        },
    }
