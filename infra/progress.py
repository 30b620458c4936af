"""Progress of long operations (``flywheel run``, ``bootstrap``), for whoever watches.

Code that takes minutes reports its steps here; it never prints. The CLI attaches a renderer
to the ``flywheel.progress`` logger (a bar in a terminal, timestamped lines otherwise); with no
renderer attached the records are plain INFO logs and cost nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

LOGGER_NAME = "flywheel.progress"
_log = logging.getLogger(LOGGER_NAME)


@dataclass(frozen=True)
class Progress:
    """One step of an operation: ``job`` (``run``, ``bootstrap``) is at ``done`` of ``total``,
    doing ``step``. A new ``step`` text starts a new step; the same text with a higher
    ``done`` only moves the bar."""

    job: str
    step: str
    done: int
    total: int


def report_progress(job: str, step: str, *, done: int, total: int) -> None:
    """Tell the watcher (if any) that ``job`` is at ``done`` of ``total``, doing ``step``."""
    event = Progress(job=job, step=step, done=max(0, min(done, total)), total=max(1, total))
    _log.info("%s [%d/%d] %s", job, event.done, event.total, step, extra={"progress": event})
