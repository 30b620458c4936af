"""Stage 4's rolling buffer: which ``training_examples`` rows a train run reads, pinned to one
snapshot. Examples older than ``buffer_days`` (per workload: ``workload_buffer_days``) came
from older policies (stale, off-policy) and are left out; ``buffer_windows > 0`` additionally
keeps only the newest that many hour windows. A run for one workload (``flywheel train
--workload W``) reads W's rows only, and its windows are the newest that hold W's rows; the
``default`` workload's rows are those recorded under it or under none, and, given the
configured workloads (``FLYWHEEL_WORKLOADS``), those recorded under any other name (rows
curated before a name was checked: the shared release's, as the gateway serves them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, TypeVar

from infra.settings.workloads import served_workload
from infra.traces.conversation import DEFAULT_WORKLOAD
from tasks.datasets import (
    BUFFER_COLUMNS,
    CREATED_AT,
    MODEL_VERSION,
    WINDOW,
    WORKLOAD,
    BufferedExample,
)

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from pyiceberg.catalog import Catalog


class BufferKeys(TypedDict):
    """The ``training_examples`` columns the buffer's limits read (a
    :class:`~tasks.datasets.BufferedExample` has them; a table created before issue 15 has no
    ``workload``)."""

    window: str
    created_at: datetime
    workload: NotRequired[str | None]


Row = TypeVar("Row", bound=BufferKeys)


def buffer_of(windows: Iterable[str], k: int) -> list[str]:
    """The last ``k`` distinct windows (all when ``k <= 0``), oldest first."""
    ordered = sorted({w for w in windows if w})
    return ordered if k <= 0 else ordered[-k:]


def workload_of(row: BufferKeys, workloads: Collection[str] | None = None) -> str:
    """The workload ``row`` belongs to: its own, ``default`` when it names none or, given the
    configured ``workloads``, one of none of them."""
    if workloads is None:
        return row.get(WORKLOAD) or DEFAULT_WORKLOAD
    return served_workload(row.get(WORKLOAD), workloads)


def of_workload(
    rows: list[Row], workload: str | None, workloads: Collection[str] | None = None
) -> list[Row]:
    """The rows of ``workload`` (:func:`workload_of`); all rows for None."""
    if workload is None:
        return rows
    return [r for r in rows if workload_of(r, workloads) == workload]


def workload_filter(
    workload: str | None, columns: set[str], workloads: Collection[str] | None = None
) -> Any:
    """The scan filter of :func:`of_workload` (``columns``: the table's; a table without a
    ``workload`` column holds the default workload's rows only)."""
    from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, EqualTo, IsNull, NotIn, Or

    if workload is None:
        return AlwaysTrue()
    if WORKLOAD not in columns:
        return AlwaysTrue() if workload == DEFAULT_WORKLOAD else AlwaysFalse()
    if workload != DEFAULT_WORKLOAD:
        return EqualTo(WORKLOAD, workload)
    if workloads is None:
        return Or(IsNull(WORKLOAD), EqualTo(WORKLOAD, workload))
    if not workloads:  # no workload configured: every row is the shared release's
        return AlwaysTrue()
    return Or(IsNull(WORKLOAD), NotIn(WORKLOAD, sorted(workloads)))


def in_buffer(
    rows: list[Row],
    *,
    buffer_days: float,
    workload_days: dict[str, float] | None = None,
    now: datetime | None = None,
    workloads: Collection[str] | None = None,
) -> list[Row]:
    """The rows created within their workload's buffer (``workload_days``, else
    ``buffer_days``; ``0`` keeps everything) before ``now`` (``workloads``: as
    :func:`workload_of`)."""
    now = now or datetime.now(UTC)
    days = workload_days or {}
    out = []
    for row in rows:
        limit = days.get(workload_of(row, workloads), buffer_days)
        if limit <= 0 or row[CREATED_AT] >= now - timedelta(days=limit):
            out.append(row)
    return out


@dataclass(frozen=True, kw_only=True)
class BufferScope:
    """Which rows of the rolling buffer a selection reads: :func:`read_examples`'s limits
    (the newest ``buffer_windows``, ``buffer_days`` and ``workload_days``, the rows
    ``served_by`` one version, ``workload``'s rows among the configured ``workloads``)."""

    buffer_windows: int = 0
    buffer_days: float = 0
    workload_days: dict[str, float] | None = None
    served_by: str | None = None
    workload: str | None = None
    workloads: Collection[str] | None = None


def read_examples(
    catalog: Catalog,
    buffer_windows: int = 0,
    *,
    buffer_days: float = 0,
    workload_days: dict[str, float] | None = None,
    served_by: str | None = None,
    workload: str | None = None,
    workloads: Collection[str] | None = None,
) -> tuple[list[BufferedExample], int | None, list[str]]:
    """Rows of the rolling buffer at the table's current snapshot: (rows, snapshot id,
    windows). The day limit is pushed into the scan (``created_at`` is the partition); with
    ``served_by``, only rows that model version answered (on-policy traffic); with
    ``workload``, only that workload's rows (see :func:`of_workload`; ``workloads``: the
    configured ones)."""
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, In

    from infra.catalog import get_table

    table = get_table(catalog, "training_examples")
    snap = table.current_snapshot()
    if snap is None:
        return [], None, []
    sid = snap.snapshot_id
    columns = {x.name for x in table.schema().fields}
    mine = workload_filter(workload, columns, workloads)
    longest = max([buffer_days, *(workload_days or {}).values()])
    newest = buffer_days > 0 and all(d > 0 for d in (workload_days or {}).values())
    since: Any = mine
    if newest and longest > 0:
        oldest = datetime.now(UTC) - timedelta(days=longest)
        since = And(mine, GreaterThanOrEqual(CREATED_AT, oldest.isoformat()))
    names = table.scan(row_filter=since, selected_fields=(WINDOW,), snapshot_id=sid).to_arrow()
    windows = buffer_of(names.column(WINDOW).to_pylist(), buffer_windows)
    if not windows:
        return [], sid, []
    fields = tuple(f for f in BUFFER_COLUMNS if f in columns)
    row_filter: Any = And(mine, In(WINDOW, windows))
    if served_by:
        row_filter = And(row_filter, EqualTo(MODEL_VERSION, served_by))
    data = table.scan(row_filter=row_filter, selected_fields=fields, snapshot_id=sid).to_arrow()
    rows: list[BufferedExample] = of_workload(data.to_pylist(), workload, workloads)
    rows = in_buffer(
        rows, buffer_days=buffer_days, workload_days=workload_days, workloads=workloads
    )
    return rows, sid, sorted({r["window"] for r in rows})
