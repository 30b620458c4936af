"""Langfuse annotation queues (production human review) through the public API:
``GET /api/public/annotation-queues/{queueId}/items`` (page-based) and
``POST /api/public/annotation-queues/{queueId}/items`` with ``{"objectId": <trace id>,
"objectType": "TRACE"}``. The queue itself (and its score configs) is created by a person in
the Langfuse UI; its id is ``FLYWHEEL_REVIEW__LANGFUSE_QUEUE_ID``. Reviewers' labels are
Langfuse scores on the trace."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import httpx

from infra.errors import SourceError, TransientSourceError
from infra.traces.langfuse_http import LangfuseHttp

log = logging.getLogger(__name__)


class LangfuseReviewQueue(LangfuseHttp):
    """One annotation queue."""

    def __init__(
        self,
        *,
        host: str,
        public_key: str,
        secret_key: str,
        queue_id: str,
        timeout_s: float = 30.0,
        page_size: int = 100,
    ) -> None:
        self.url = f"{host.rstrip('/')}/api/public/annotation-queues/{quote(queue_id, safe='')}"
        self.page_size = page_size
        self._http = httpx.Client(timeout=timeout_s, auth=httpx.BasicAuth(public_key, secret_key))

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self._http.request(method, self.url + path, **kwargs)
        except httpx.TransportError as exc:
            raise TransientSourceError(f"Langfuse annotation queue: {type(exc).__name__}") from exc
        if resp.status_code >= 500 or resp.status_code == 429:
            raise TransientSourceError(f"Langfuse annotation queue answered {resp.status_code}")
        if resp.status_code != 200:
            raise SourceError(
                f"Langfuse annotation queue answered {resp.status_code} to {method} items "
                "(check FLYWHEEL_REVIEW__LANGFUSE_QUEUE_ID and the API keys)"
            )
        return resp.json()

    def items(self, *, status: str | None = None) -> list[dict[str, Any]]:
        """Every item of the queue (``status``: PENDING or COMPLETED only)."""
        out: list[dict[str, Any]] = []
        page = 1
        while True:
            params: dict[str, Any] = {"page": page, "limit": self.page_size}
            if status:
                params["status"] = status
            body = self._call("GET", "/items", params=params)
            out += body["data"]
            if page >= int(body["meta"].get("totalPages") or 0):
                return out
            page += 1

    def add_traces(self, trace_ids: Iterable[str]) -> int:
        """Queue the traces not already in the queue; returns how many were added."""
        present = {i["objectId"] for i in self.items() if i.get("objectType") == "TRACE"}
        added = 0
        for trace_id in dict.fromkeys(trace_ids):
            if trace_id in present:
                continue
            self._call("POST", "/items", json={"objectId": trace_id, "objectType": "TRACE"})
            added += 1
        log.info("annotation queue: %d traces added, %d already queued", added, len(present))
        return added
