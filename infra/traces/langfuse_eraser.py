"""Erasure and retention in Langfuse, the production raw store, through its public API.

Deleting: ``DELETE /api/public/traces`` with exactly ``{"traceIds": [...]}`` (the server's
schema is strict), at most :data:`DELETE_BATCH_MAX` ids a request; a trace's scores go with it
(the worker deletes scores by trace id), so scores are never deleted one by one (each request
counts against Langfuse Cloud's daily ``trace-delete`` budget). Every trace id flywheel's
tables know for the user is requested, listed or not: a trace without observations (a
feedback score, its comment, is all Langfuse holds of it) is in no observation list.
``DELETE /api/public/traces/{id}`` one by one only where the batch endpoint is missing.
Every delete request spends the budget, so none is retried but on a 429 (nothing was done);
a delete that still fails is *deferred*: the next retention run requests it again. A listed
item whose ``traceId`` is null names no trace (never the id ``"None"``).

Retention deletes the traces with an observation past the cutoff and the *orphans*: traces
with a score past the cutoff and no observation (a feedback score on a trace whose
observations are gone or never came), which no observation list finds (v3 scores, else v2).

Finding the traces (the user's raw id, the lists, the time scans) and confirming deletes (the
read-back) are :class:`~infra.traces.langfuse_finder.LangfuseFinder`'s, which the eraser
extends.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from infra.errors import SourceError, SourceUnavailable, TransientSourceError
from infra.traces.langfuse_finder import SCAN_DAYS, V1_TRACES, LangfuseFinder
from infra.traces.langfuse_scan import quoted

log = logging.getLogger(__name__)

DELETE_BATCH_MAX = 1000
"""The most trace ids ``DELETE /api/public/traces`` accepts in one request (400 above)."""


@dataclass
class LangfuseDeletion:
    """What was asked of Langfuse and what a read-back showed (trace ids; never user ids).

    ``requested``: deletes Langfuse accepted; ``confirmed``: those a read-back no longer
    finds; ``deferred``: not requested because the server's delete budget ran out
    (``retry_after_s``: when it said to come back). ``api``: ``v2`` or ``v1`` (the list used).
    """

    requested: list[str] = field(default_factory=list)
    confirmed: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    retry_after_s: float | None = None
    api: str = ""

    @property
    def pending(self) -> list[str]:
        """Requested, not yet confirmed: re-check them later (:meth:`LangfuseEraser.recheck`)."""
        done = set(self.confirmed)
        return [t for t in self.requested if t not in done]

    @property
    def traces_deleted(self) -> int:
        """How many trace deletes Langfuse accepted (confirmed or pending)."""
        return len(self.requested)

    def counts(self) -> dict[str, int]:
        """Counts for audit details and reports."""
        return {
            "traces_deleted": len(self.requested),  # requested: Langfuse queues deletes
            "traces_confirmed": len(self.confirmed),
            "traces_pending": len(self.pending),
            "traces_deferred": len(self.deferred),
        }


class LangfuseEraser(LangfuseFinder):
    """Finds and deletes traces through Langfuse's public API (Basic auth with the keys)."""

    ROLE = "erasure"

    def __init__(
        self, *, delete_batch: int = DELETE_BATCH_MAX, scan_days: int = SCAN_DAYS, **connection: Any
    ) -> None:
        super().__init__(scan_days=scan_days, **connection)
        self.delete_batch = max(1, min(delete_batch, DELETE_BATCH_MAX))

    # -- the governance operations ---------------------------------------------------------
    def erase_user(
        self, *, key: str, salt: str, known_trace_ids: Iterable[str]
    ) -> LangfuseDeletion:
        """Delete every trace of the user with salted ``key``: every id of ``known_trace_ids``
        (named by flywheel's tables; observations or not) and those listed under their raw
        ``userId``; then read back which deletes took effect."""
        known = set(known_trace_ids)
        raw = self.find_user_id(key, salt, sorted(known))
        listed = self.user_traces(user_id=raw) if raw else set()
        done = self.request_deletes(listed | known)
        if raw and self.api == "v2":  # a fresh listing tells for the listed ones
            still = self.user_traces(user_id=raw)
            gone = (set(done.requested) & listed) - still
            rest = [t for t in done.requested if t not in listed]
            done.confirmed = sorted(gone | self.confirm(rest)[0])
        else:
            done.confirmed = sorted(self.confirm(done.requested)[0])
        return done

    def expire(self, cutoff: datetime) -> LangfuseDeletion:
        """Delete the traces with an observation (v1: a timestamp) before ``cutoff``, and those
        with only a score before it (no observation: a feedback score, its comment, is all
        Langfuse holds of them), within :attr:`scan_days` of it.

        Raises:
            SourceError: the server lists no traces (404 to both lists).
        """
        try:
            listed = self.traces_before(cutoff)
        except SourceUnavailable:
            raise SourceError(
                f"Langfuse at {self.host} answers 404 to both trace lists (v2 observations, "
                "v1 traces): retention cannot find the traces past their age there"
            ) from None
        orphans = self.orphans_before(cutoff, known=listed)
        done = self.request_deletes(listed | orphans)
        asked = set(done.requested)
        if self.api == "v2":  # a fresh listing tells for the listed ones
            gone = (asked & listed) - self.traces_before(cutoff)
            done.confirmed = sorted(gone | self.confirm(asked & orphans)[0])
        else:
            done.confirmed = sorted(self.confirm(done.requested)[0])
        return done

    def recheck(self, trace_ids: Iterable[str]) -> LangfuseDeletion:
        """A later run's look at pending (or deferred) deletes: those not confirmed gone are
        requested again (idempotent) and read back; ``confirmed`` is every one gone now."""
        gone, still = self.confirm(trace_ids)
        done = self.request_deletes(still)
        done.confirmed = sorted(gone | self.confirm(done.requested)[0])
        return done

    def confirm(self, trace_ids: Iterable[str]) -> tuple[set[str], set[str]]:
        """(confirmed, unconfirmed): which of ``trace_ids`` a read-back finds nothing of, and
        which Langfuse still holds or no served endpoint can read."""
        ids = set(trace_ids)
        still = {t for t in sorted(ids) if self.remains(t) is not False}
        return ids - still, still

    # -- deleting ---------------------------------------------------------------------------
    def request_deletes(self, trace_ids: Iterable[str]) -> LangfuseDeletion:
        """Ask Langfuse to delete the traces (and with them their scores), in batches; a
        budget that runs out defers the rest instead of waiting it out.

        Raises:
            TransientSourceError: a batch still failed after the retries (rerun: idempotent).
            SourceError: bad keys or a refused request.
        """
        ids = sorted(set(trace_ids))
        done = LangfuseDeletion(api=self.api or "")
        for i in range(0, len(ids), self.delete_batch):
            chunk = ids[i : i + self.delete_batch]
            try:
                self._delete_batch(chunk)
            except TransientSourceError as exc:  # not retried: a later run requests them again
                done.deferred, done.retry_after_s = ids[i:], exc.retry_after_s
                log.warning(
                    "Langfuse trace deletes failed (%s): %d deferred to the next retention run",
                    exc,
                    len(done.deferred),
                )
                break
            done.requested += chunk
        return done

    def _delete_batch(self, chunk: list[str]) -> None:
        # each try spends the daily trace-delete budget: only a 429 (nothing done) is retried
        try:
            self.send(
                "trace delete", "DELETE", V1_TRACES, json={"traceIds": chunk}, idempotent=False
            )
        except SourceUnavailable:  # an older server without the batch endpoint
            for tid in chunk:
                try:
                    self.send(
                        "trace delete", "DELETE", f"{V1_TRACES}/{quoted(tid)}", idempotent=False
                    )
                except SourceUnavailable:
                    continue  # already gone
