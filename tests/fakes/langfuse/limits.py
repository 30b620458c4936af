"""What makes the fake Langfuse behave like a production server rather than a dictionary:
rate limits per resource answered with 429 and ``Retry-After`` (fixed windows, as Langfuse's
``rate-limiter-flexible`` counts them), and deletes that are queued (answered at once, carried
out by a worker later: here after a number of reads, or when the test says so)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


@dataclass
class Budget:
    """``points`` requests per window of ``window_s`` seconds, the window starting at the
    first request; over budget, a 429 with ``Retry-After`` = the seconds left in the window."""

    points: int
    window_s: float
    used: int = 0
    window_end: float = 0.0
    told: bool = False
    throttled: int = 0  # 429s answered
    ignored: int = 0  # requests that came back before the Retry-After they were given

    def take(self, now: float | None = None) -> int | None:
        """Count one request; the ``Retry-After`` seconds when it is over budget, else None."""
        now = time.monotonic() if now is None else now
        if now >= self.window_end:
            self.used, self.window_end, self.told = 0, now + self.window_s, False
        if self.used < self.points:
            self.used += 1
            return None
        if self.told:
            self.ignored += 1
        self.told = True
        self.throttled += 1
        return max(1, math.ceil(self.window_end - now))


class DeleteQueue:
    """Trace deletes as Langfuse's worker carries them out: ``visible_after_reads`` = 0 at
    once; N: the next N read requests still see the trace; None: only when
    :meth:`process` is called (the worker ran)."""

    def __init__(self) -> None:
        self.visible_after_reads: int | None = 0
        self.queued: dict[str, int] = {}

    def add(self, trace_ids: list[str]) -> list[str]:
        """Queue the deletes; returns the ids to delete at once."""
        if self.visible_after_reads == 0:
            return list(trace_ids)
        for tid in trace_ids:
            self.queued.setdefault(tid, self.visible_after_reads or 0)
        return []

    def on_read(self) -> list[str]:
        """One read request arrived: returns the ids whose delete takes effect before it."""
        if self.visible_after_reads is None:
            return []
        due = [tid for tid, left in self.queued.items() if left == 0]
        for tid in list(self.queued):
            if tid in due:
                del self.queued[tid]
            else:
                self.queued[tid] -= 1
        return due

    def process(self) -> list[str]:
        """The worker ran: every queued delete takes effect."""
        due, self.queued = list(self.queued), {}
        return due
