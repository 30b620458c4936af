"""Which workloads have enough new data to train this week: a cheap count per workload of the
curated ``training_examples`` rows a train run for it would read (its rolling buffer: the
same day and window limits as :func:`tasks.train.buffer.read_examples`), compared with the
training's own minimum (``FLYWHEEL_TRAIN__MIN_PAIRS``).

The count reads three columns only. It is an upper bound of what the run selects (every
preference pair needs two rows and every single or prompt one; golden, consent and on-policy
filters only remove rows), so a workload counted below the minimum would be skipped by
:func:`tasks.train.plan.plan_training` too; one counted above it is trained, and the train
run itself says "skipped" with its exact count when its selection falls short."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from prefect import task

from infra.task_retries import IO_RETRIES
from infra.traces.conversation import DEFAULT_WORKLOAD
from tasks.train.buffer import BufferKeys, buffer_of, in_buffer, workload_of

if TYPE_CHECKING:
    from collections.abc import Collection

    from pyiceberg.catalog import Catalog

    from infra.settings import Settings


@dataclass(frozen=True)
class WorkloadCounts:
    """Rows in each workload's buffer (``counts``, by configured workload; rows naming none,
    or one that is not configured, count as ``default``) and the minimum a workload needs to
    train (``minimum``)."""

    counts: dict[str, int]
    minimum: int

    def ready(self) -> list[str]:
        """The workloads with at least the minimum, sorted."""
        return sorted(w for w, n in self.counts.items() if n >= self.minimum)

    def short(self) -> dict[str, int]:
        """The workloads below the minimum, with their counts."""
        return {w: n for w, n in sorted(self.counts.items()) if n < self.minimum}

    def labelled(self) -> bool:
        """Whether any traffic names a workload other than ``default``."""
        return any(w != DEFAULT_WORKLOAD for w in self.counts)


def count_by_workload(catalog: Catalog, settings: Settings) -> WorkloadCounts:
    """Count each workload's rows in its rolling buffer at the current snapshot."""
    from pyiceberg.expressions import AlwaysTrue, GreaterThanOrEqual

    from infra.catalog import get_table

    cfg = settings.train
    table = get_table(catalog, "training_examples")
    if table.current_snapshot() is None:
        return WorkloadCounts(counts={}, minimum=cfg.min_pairs)
    columns = {x.name for x in table.schema().fields}
    fields = tuple(f for f in ("workload", "window", "created_at") if f in columns)
    days = [cfg.buffer_days, *cfg.workload_buffer_days.values()]
    row_filter: Any = AlwaysTrue()
    if all(d > 0 for d in days):  # every workload has a day limit: push the longest down
        oldest = datetime.now(UTC) - timedelta(days=max(days))
        row_filter = GreaterThanOrEqual("created_at", oldest.isoformat())
    rows: list[BufferKeys] = (
        table.scan(row_filter=row_filter, selected_fields=fields).to_arrow().to_pylist()
    )
    workloads = settings.workloads
    rows = in_buffer(
        rows,
        buffer_days=cfg.buffer_days,
        workload_days=cfg.workload_buffer_days,
        workloads=workloads,
    )
    counts = _per_workload(rows, cfg.buffer_windows, workloads)
    return WorkloadCounts(counts=counts, minimum=cfg.min_pairs)


def _per_workload(
    rows: list[BufferKeys], buffer_windows: int, workloads: Collection[str]
) -> dict[str, int]:
    """Rows per workload within its newest ``buffer_windows`` windows (all when <= 0); a row
    naming a workload that is not configured is the shared release's (``default``)."""
    windows: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        windows[workload_of(row, workloads)][row.get("window") or ""] += 1
    counts = {}
    for workload, per_window in windows.items():
        kept = buffer_of(per_window, buffer_windows)
        counts[workload] = sum(per_window[w] for w in kept)
    return counts


@task(**IO_RETRIES)
def count_by_workload_task(catalog: Catalog, settings: Settings) -> WorkloadCounts:
    """Returns each workload's row count in its buffer (as :func:`count_by_workload`)."""
    return count_by_workload(catalog, settings)
