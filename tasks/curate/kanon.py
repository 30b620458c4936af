"""k-anonymity: a question pattern reaches the table only once k distinct users asked it.

It holds back, it does not drop: a row whose pattern has fewer than k distinct users (counting
the table, this window and rows still held) is written, already anonymised, to
``curate/held/window=<w>/held.parquet``; every later run counts held rows too and releases a
group as soon as it reaches k (the released rows keep their own window and are written in the
releasing window's commit). Users who withdrew consent count for nothing and their held rows
are never released. Held rows older than the raw-retention period are deleted by the retention
flow.

Held rows are written with a plain put: curate's k-anonymity step, from its read of the held
rows to its last write, holds the erasure lease shared (``flows.curate``), and forget-user and
retention, which rewrite these objects too, hold it exclusive, so neither writes back what it
read before the other changed it.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import regex as re
from prefect import task

from infra.keys import HELD_PREFIX, held_key
from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.store import ObjectStore
    from tasks.curate.rows import CuratedExample
    from tasks.datasets import Quarantine, Rollout

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SPACE = re.compile(r"\s+")


@dataclass(kw_only=True)
class KDecision:
    """What k-anonymity decided: rows to write, rows to hold, held rows released now."""

    release: list[CuratedExample]
    hold: list[CuratedExample]
    released_ids: list[str]
    patterns_held: int


@dataclass(kw_only=True)
class KState:
    """What k-anonymity and the commit need to know about earlier windows."""

    members: dict[str, set[str]]  # pattern -> distinct users in the table (other windows)
    in_table: set[str]  # every trace id in the table
    pending: list[CuratedExample]  # held rows of other windows not in the table yet
    withdrawn: int  # rows in the table whose user has since withdrawn consent


def placeholder_pattern(text: str, spans: Sequence[tuple[int, int, str]]) -> str:
    """The k-anonymity key of a question: entities -> ``<TYPE>``, numbers -> ``<NUM>``,
    lower-cased, whitespace collapsed (independent of the anonymisation operator)."""
    parts, last = [], 0
    for start, end, etype in sorted(spans):
        if start < last:
            continue
        parts.append(_NUMBER.sub("<NUM>", text[last:start].lower()))
        parts.append(f"<{etype}>")
        last = end
    parts.append(_NUMBER.sub("<NUM>", text[last:].lower()))
    return _SPACE.sub(" ", "".join(parts)).strip(" .!?")


def _member(row: CuratedExample) -> str:
    return row.get("user_key") or f"trace:{row['trace_id']}"


def canonical_patterns(
    rows: list[CuratedExample], state: KState, *, threshold: float
) -> list[CuratedExample]:
    """``rows`` with each pattern replaced by its paraphrase group's canonical pattern (the
    table's and held rows' patterns first): :func:`tasks.curate.paraphrase.group_patterns`."""
    from tasks.curate.paraphrase import group_patterns

    known = [*state.members, *(r["pattern"] for r in state.pending)]
    mapping = group_patterns([r["pattern"] for r in rows], known, threshold=threshold)
    return [{**r, "pattern": mapping[r["pattern"]]} for r in rows]


def k_anonymize(
    rows: list[CuratedExample],
    *,
    pending: list[CuratedExample],
    table_members: dict[str, set[str]],
    k: int,
) -> KDecision:
    """Release the rows whose pattern has at least ``k`` distinct users across the table
    (other windows), this window and the still-held ``pending`` rows; hold the rest."""
    members: dict[str, set[str]] = defaultdict(set)
    for pattern, users in table_members.items():
        members[pattern] |= users
    for row in (*rows, *pending):
        members[row["pattern"]].add(_member(row))
    ok = {p for p, users in members.items() if len(users) >= k}
    release = [r for r in rows if r["pattern"] in ok]
    released = sorted((r for r in pending if r["pattern"] in ok), key=lambda r: r["trace_id"])
    hold = [r for r in rows if r["pattern"] not in ok]
    return KDecision(
        release=release + released,
        hold=hold,
        released_ids=[r["trace_id"] for r in released],
        patterns_held=len({r["pattern"] for r in hold}),
    )


def k_state(catalog: Catalog, store: ObjectStore, *, window: str, opted_out: set[str]) -> KState:
    """Read the table (pattern, user, trace id) and the held area; users who withdrew consent
    count for nothing and their held rows are never released."""
    from pyiceberg.expressions import AlwaysTrue

    from infra.catalog import get_table

    table = get_table(catalog, "training_examples")
    data = (
        table.scan(
            row_filter=AlwaysTrue(), selected_fields=("trace_id", "user_key", "pattern", "window")
        )
        .to_arrow()
        .to_pylist()
    )
    members: dict[str, set[str]] = defaultdict(set)
    for row in data:
        if row["window"] != window and row["user_key"] not in opted_out:
            members[row["pattern"]].add(_member(row))
    in_table = {row["trace_id"] for row in data}
    pending = [
        r
        for r in read_held(store, exclude_window=window)
        if r["trace_id"] not in in_table and r["user_key"] not in opted_out
    ]
    withdrawn = sum(1 for r in data if r["user_key"] in opted_out and r["window"] != window)
    return KState(members=dict(members), in_table=in_table, pending=pending, withdrawn=withdrawn)


def drop_erased(
    examples: list[CuratedExample],
    quarantined: list[Quarantine],
    *,
    rows: Sequence[Rollout],
    excluded: Container[str],
    before: Container[str],
) -> tuple[list[CuratedExample], list[Quarantine]]:
    """``examples`` and ``quarantined`` without the traces of the named users of ``rows`` (the
    window's rollouts) who are ``excluded`` now and were not ``before`` (when the gates read
    consent): read again under the erasure lease, so a forget-user that ran after the window
    was read (and tombstoned its user) is not undone by this run's writes."""
    gone = {
        r["trace_id"]
        for r in rows
        if (user := r.get("user_key")) and user in excluded and user not in before
    }
    if not gone:
        return examples, quarantined
    kept = [e for e in examples if e["trace_id"] not in gone]
    bad = [q for q in quarantined if not any(t in q["record"] for t in gone)]
    return kept, bad


def read_held(store: ObjectStore, *, exclude_window: str | None = None) -> list[CuratedExample]:
    """Every held row (optionally not those of one window)."""
    rows = []
    skip = held_key(exclude_window) if exclude_window else None
    for key in store.list(HELD_PREFIX):
        if key.endswith(".parquet") and key != skip:
            rows += pq.read_table(io.BytesIO(store.get(key))).to_pylist()
    return rows


def write_held(store: ObjectStore, *, window: str, rows: list[CuratedExample]) -> None:
    """Replace the window's held rows (deleting the object when none are held)."""
    if rows:
        store.put(held_key(window), _parquet(sorted(rows, key=lambda r: r["trace_id"])))
    else:
        store.delete(held_key(window))


def prune_held(store: ObjectStore, *, in_table: set[str], opted_out: set[str]) -> int:
    """Remove held rows that are in the table now or whose user withdrew consent; returns how
    many were removed."""
    removed = 0
    for key in store.list(HELD_PREFIX):
        rows = pq.read_table(io.BytesIO(store.get(key))).to_pylist()
        keep = [r for r in rows if r["trace_id"] not in in_table and r["user_key"] not in opted_out]
        if len(keep) != len(rows):
            removed += len(rows) - len(keep)
            store.put(key, _parquet(keep)) if keep else store.delete(key)
    return removed


def _parquet(rows: Sequence[CuratedExample]) -> bytes:
    from infra.catalog import to_arrow

    sink = io.BytesIO()
    pq.write_table(to_arrow("training_examples", rows), sink)
    return sink.getvalue()


@task(**IO_RETRIES)
def k_state_task(
    catalog: Catalog, store: ObjectStore, *, window: str, opted_out: set[str]
) -> KState:
    """Returns the table's patterns and trace ids and the still-held rows of other windows."""
    return k_state(catalog, store, window=window, opted_out=opted_out)


@task(**IO_RETRIES)
def held_task(
    store: ObjectStore,
    *,
    window: str,
    hold: list[CuratedExample],
    in_table: set[str],
    opted_out: set[str],
) -> int:
    """Returns how many held rows of other windows were pruned (released or withdrawn)."""
    write_held(store, window=window, rows=hold)
    return prune_held(store, in_table=in_table, opted_out=opted_out)
