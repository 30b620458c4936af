"""Erasure and retention in Langfuse, the production raw store, through its public API:
``GET /api/public/traces`` (to find a user's traces by their hashed user id, or traces past
retention), ``GET /api/public/v2/scores?traceId=`` and ``DELETE /api/public/scores/{id}`` for
their scores, then ``DELETE /api/public/traces`` with ``{"traceIds": [...]}`` (falling back to
``DELETE /api/public/traces/{id}`` where the batch endpoint is missing).

Langfuse knows users by raw id; flywheel only ever holds the salted key, so a user's traces
are those whose ``userId`` hashes to the key (plus the trace ids the tables still name).
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from infra.errors import SourceError, TransientSourceError
from infra.traces.langfuse_http import LangfuseHttp

log = logging.getLogger(__name__)
_BATCH = 100


@dataclass
class LangfuseDeletion:
    """What was deleted in Langfuse (counts only)."""

    traces_deleted: int = 0
    scores_deleted: int = 0


class LangfuseEraser(LangfuseHttp):
    """Deletes traces and scores through Langfuse's public API (Basic auth with the keys)."""

    def __init__(
        self,
        *,
        host: str,
        public_key: str,
        secret_key: str,
        page_size: int = 100,
        retries: int = 4,
        timeout_s: float = 30,
        backoff_s: float = 0.5,
    ) -> None:
        self.host = host.rstrip("/")
        self.page_size = page_size
        self.retries = retries
        self.backoff_s = backoff_s
        self._http = httpx.Client(
            timeout=timeout_s, auth=httpx.BasicAuth(public_key, secret_key), follow_redirects=True
        )

    @classmethod
    def from_settings(cls, settings: Any) -> LangfuseEraser:
        """Build from ``settings.langfuse``; raises ConfigError when the keys are missing."""
        lf = settings.langfuse
        return cls(**cls.connection(lf, "erasure"), retries=lf.page_retries)

    # -- finding ----------------------------------------------------------------------------
    def traces(self, **query: Any) -> Iterator[dict[str, Any]]:
        """Every trace (id, userId, timestamp) matching ``query``, page by page."""
        page = 1
        while True:
            params = {**query, "page": page, "limit": self.page_size}
            try:
                body = self._request("GET", "/api/public/traces", params=params)
            except _Missing:
                raise SourceError(
                    f"Langfuse at {self.host} does not list traces (GET /api/public/traces): "
                    "cannot find the traces to delete"
                ) from None
            data = body.get("data") or []
            yield from data
            if not data or page >= int((body.get("meta") or {}).get("totalPages") or 0):
                return
            page += 1

    def trace_ids_before(self, cutoff: datetime) -> set[str]:
        """Ids of the traces older than ``cutoff``."""
        return {t["id"] for t in self.traces(toTimestamp=cutoff.isoformat())}

    # -- deleting ---------------------------------------------------------------------------
    def delete(self, trace_ids: Iterable[str]) -> LangfuseDeletion:
        """Delete the traces' scores, then the traces (batched)."""
        ids = sorted(set(trace_ids))
        result = LangfuseDeletion()
        for tid in ids:
            try:
                scores = self._request("GET", "/api/public/v2/scores", params={"traceId": tid})
            except _Missing:
                scores = {}  # no score listing: deleting the trace deletes its scores
            own = {s["id"] for s in scores.get("data") or [] if s.get("traceId") in (tid, None)}
            for score_id in sorted(own):
                try:
                    self._request("DELETE", f"/api/public/scores/{_q(score_id)}")
                except _Missing:
                    continue  # already gone (a retried run)
                result.scores_deleted += 1
        for i in range(0, len(ids), _BATCH):
            chunk = ids[i : i + _BATCH]
            try:
                self._request("DELETE", "/api/public/traces", json={"traceIds": chunk})
            except _Missing:  # an older server: one trace at a time
                for tid in chunk:
                    try:
                        self._request("DELETE", f"/api/public/traces/{_q(tid)}")
                    except _Missing:
                        continue  # already gone
            result.traces_deleted += len(chunk)
        return result

    # -- HTTP -------------------------------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        url = urllib.parse.urljoin(self.host + "/", path.lstrip("/"))
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                resp = self._http.request(method, url, **kwargs)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: cannot reach {self.host}"
                continue
            if resp.status_code in (404, 405):
                raise _Missing(path)
            if resp.status_code in (401, 403):
                raise SourceError(
                    f"Langfuse at {self.host} refused the API keys for {method} {path} (HTTP "
                    f"{resp.status_code}); check FLYWHEEL_LANGFUSE__PUBLIC_KEY/SECRET_KEY"
                )
            if resp.status_code >= 500 or resp.status_code == 429:
                last = f"HTTP {resp.status_code}"
                continue
            if resp.status_code >= 400:
                raise SourceError(
                    f"Langfuse at {self.host} rejected {method} {path} (HTTP {resp.status_code})"
                )
            try:
                body = resp.json() if resp.content else {}
            except ValueError:
                body = {}
            return body if isinstance(body, dict) else {}
        raise TransientSourceError(
            f"Langfuse at {self.host} ({method} {path}) failed {self.retries + 1} times (last: "
            f"{last}); check FLYWHEEL_LANGFUSE__HOST"
        )


class _Missing(Exception):
    """HTTP 404/405: the endpoint or the object does not exist."""


def _q(value: str) -> str:
    return urllib.parse.quote(value, safe="")
