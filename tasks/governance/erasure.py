"""Forget a user: find their traces, delete their rows in every table, and scrub every object
of the store of their data (deletes are made physical by :mod:`.maintenance`).

A user is named only by their salted key. The audit trail records a *receipt* per request
(:mod:`.receipts`: derived from the key, never the key), so after erasure no table, object or
data file holds the key, yet a person holding the key can prove the erasure happened.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prefect import task

from infra.cas import compare_and_swap
from infra.consent import erasure_receipt
from infra.errors import ObjectNotFound, PreconditionFailed
from infra.keys import MODELS_PREFIX, ROLLOUTS_PREFIX, TRACES_PREFIX
from infra.privacy import user_key as hash_user
from infra.serving.models import rewrite_published_file
from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.audit import AuditRow
    from infra.store import ObjectStore
    from infra.traces.langfuse_eraser import LangfuseDeletion
    from tasks.datasets import PreferencePair, Quarantine
    from tasks.golden_proposals import ProposalRow

log = logging.getLogger(__name__)

KEY_RE = re.compile(r"^[0-9a-f]{64}$")
TEXT_SUFFIXES = (".json", ".yaml", ".yml", ".md", ".txt", ".csv")
SCRUBBED = (".jsonl", ".parquet", *TEXT_SUFFIXES)
USER_TABLES = [
    "training_examples",
    "preference_pairs",
    "consent",
    "audit_log",
    "quarantine",
    "review_queue",
    "golden_proposals",
]
_USER_ID_IN_LINE = re.compile(r'"user_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


@dataclass
class Erasure:
    """What an erasure or retention run removed (counts only; ``receipt`` for forget-user)."""

    receipt: str = ""
    rows_deleted: dict[str, int] = field(default_factory=dict)
    objects_rewritten: int = 0
    objects_deleted: int = 0
    snapshots_expired: int = 0
    orphan_files_removed: int = 0
    langfuse_traces_deleted: int = 0  # deletes Langfuse accepted (it queues them)
    langfuse_traces_confirmed: int = 0  # of those, gone on read-back
    langfuse_traces_pending: int = 0  # of those, still there on read-back
    langfuse_traces_deferred: int = 0  # not requested: Langfuse's delete budget ran out
    langfuse_recheck: list[str] = field(default_factory=list)  # pending + deferred trace ids
    # retention: earlier erasures whose unconfirmed Langfuse deletes it re-checked
    langfuse_rechecked_erasures: int = 0
    langfuse_recheck_confirmed: int = 0  # of their deletes, confirmed by this run's read-back
    langfuse_recheck_pending: int = 0  # of their deletes, still unconfirmed after it
    found: bool = True  # forget-user: False when the user had no data anywhere

    def add_langfuse(self, done: LangfuseDeletion) -> None:
        """Take the counts of a Langfuse deletion, and the trace ids a later run must re-check
        (pending) or request again (deferred): ``LangfuseEraser.recheck`` does both."""
        self.langfuse_traces_deleted += len(done.requested)
        self.langfuse_traces_confirmed += len(done.confirmed)
        self.langfuse_traces_pending += len(done.pending)
        self.langfuse_traces_deferred += len(done.deferred)
        self.langfuse_recheck += done.pending + done.deferred

    def langfuse_counts(self) -> dict[str, int]:
        """Langfuse trace deletes requested, confirmed by a read-back, pending (Langfuse queues
        deletes; a later run re-checks them) and deferred (its delete budget ran out)."""
        return {
            "langfuse_traces_deleted": self.langfuse_traces_deleted,
            "langfuse_traces_confirmed": self.langfuse_traces_confirmed,
            "langfuse_traces_pending": self.langfuse_traces_pending,
            "langfuse_traces_deferred": self.langfuse_traces_deferred,
        }

    def add_recheck(self, confirmed: int, pending: int) -> None:
        """Take one erasure's re-check: deletes confirmed now and those still pending."""
        self.langfuse_rechecked_erasures += 1
        self.langfuse_recheck_confirmed += confirmed
        self.langfuse_recheck_pending += pending

    def recheck_counts(self) -> dict[str, int]:
        """What retention's re-check of earlier erasures' Langfuse deletes found."""
        return {
            "langfuse_rechecked_erasures": self.langfuse_rechecked_erasures,
            "langfuse_recheck_confirmed": self.langfuse_recheck_confirmed,
            "langfuse_recheck_pending": self.langfuse_recheck_pending,
        }

    def erased_anything(self) -> bool:
        """Whether any row or object was deleted or rewritten (or a Langfuse delete requested
        or deferred)."""
        changed = self.objects_rewritten + self.objects_deleted + self.langfuse_traces_deleted
        changed += self.langfuse_traces_deferred  # found in Langfuse, deleted on a later run
        return bool(changed or any(self.rows_deleted.values()))


def check_user_key(value: str) -> str:
    """The salted user key, validated (a raw user id must never reach a flow run)."""
    if not KEY_RE.match(value):
        raise ValueError(
            "expected a user key (64 hex characters); hash a user id with "
            "`flywheel forget-user USER_ID`, which never sends the raw id to Prefect"
        )
    return value


# --- tables ------------------------------------------------------------------------------


def user_trace_ids(catalog: Catalog, store: ObjectStore, key: str, salt: str) -> set[str]:
    """Every trace id of the user, from training_examples, rollouts and the raw spool."""
    from pyiceberg.expressions import EqualTo

    from infra.catalog import scan

    ids = set(scan(catalog, "training_examples", EqualTo("user_key", key))["trace_id"].to_pylist())
    for obj in store.list(ROLLOUTS_PREFIX):
        if obj.endswith(".parquet"):
            t = pq.read_table(io.BytesIO(store.get(obj)), columns=["trace_id", "user_key"])
            ids |= set(t.filter(pc.equal(t["user_key"], key))["trace_id"].to_pylist())
    for obj in store.list(TRACES_PREFIX):
        for line in store.get(obj).decode("utf-8", "replace").splitlines():
            if _line_user(line, salt) == key and (tid := _json_field(line, "trace_id")):
                ids.add(tid)
    return ids


def delete_user_rows(catalog: Catalog, key: str, trace_ids: set[str]) -> dict[str, int]:
    """Delete the user's rows from every table; returns rows deleted per table."""
    from pyiceberg.expressions import EqualTo

    from infra.catalog import delete_rows, scan

    deleted: dict[str, int] = {}
    for name in ("training_examples", "consent"):
        n = scan(catalog, name, EqualTo("user_key", key)).num_rows
        if n:
            delete_rows(catalog, name, EqualTo("user_key", key))
        deleted[name] = n
    pairs: list[PreferencePair] = scan(catalog, "preference_pairs").to_pylist()
    ids = [p["pair_id"] for p in pairs if key in (p["user_keys"] or [])]
    deleted["preference_pairs"] = _delete_in(catalog, "preference_pairs", "pair_id", ids)
    needles = [key, *trace_ids]
    audit: list[AuditRow] = scan(catalog, "audit_log").to_pylist()
    ids = [a["event_id"] for a in audit if _mentions(f"{a['subject']} {a['details']}", needles)]
    deleted["audit_log"] = _delete_in(catalog, "audit_log", "event_id", ids)
    quarantine: list[Quarantine] = scan(catalog, "quarantine").to_pylist()
    hits = [i for i, q in enumerate(quarantine) if _mentions(q["record"] or "", needles)]
    if hits:  # quarantine has no id column: rewrite the table without those rows
        from pyiceberg.expressions import AlwaysTrue

        from infra.catalog import replace_where

        keep = [q for i, q in enumerate(quarantine) if i not in set(hits)]
        replace_where(catalog, "quarantine", AlwaysTrue(), keep)
    deleted["quarantine"] = len(hits)
    # the human review queue holds the user's (anonymised) traces by trace id
    queued = scan(catalog, "review_queue").column("trace_id").to_pylist()
    ids = sorted({t for t in queued if t in trace_ids})
    deleted["review_queue"] = _delete_in(catalog, "review_queue", "trace_id", ids)
    # a golden proposal (tasks/golden_proposals.py) names the traces its question and its
    # reference came from; an item already published to a golden file is a file the operator
    # keeps (docs/operating/golden-set.md)
    proposed: list[ProposalRow] = scan(catalog, "golden_proposals").to_pylist()
    ids = sorted(
        {
            p["proposal_id"]
            for p in proposed
            if p["source_trace"] in trace_ids or p["question_trace"] in trace_ids
        }
    )
    deleted["golden_proposals"] = _delete_in(catalog, "golden_proposals", "proposal_id", ids)
    return deleted


def _delete_in(catalog: Catalog, name: str, column: str, ids: list[str]) -> int:
    from pyiceberg.expressions import In

    from infra.catalog import delete_rows

    if ids:
        delete_rows(catalog, name, In(column, ids))
    return len(ids)


def _mentions(text: str, needles: list[str]) -> bool:
    return any(n and n in text for n in needles)


# --- objects -----------------------------------------------------------------------------


def _json_field(line: str, name: str) -> str | None:
    try:
        value = json.loads(line).get(name)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _line_user(line: str, salt: str) -> str | None:
    """The user key of a spool line (malformed lines too, when a user id can be found)."""
    user = _json_field(line, "user_id")
    if user is None and (m := _USER_ID_IN_LINE.search(line)):
        user = m.group(1)
    return hash_user(user, salt) if user else None


def scrub_objects(
    store: ObjectStore, *, key: str, salt: str, trace_ids: set[str], skip_prefix: str | None
) -> tuple[int, int]:
    """Rewrite every object of the store without the user's data (spool lines, parquet rows,
    mentions of the key in text objects); returns (objects rewritten, objects deleted)."""
    rewritten = deleted = 0
    marker = f"forgotten-{erasure_receipt(key)[:16]}"

    def scrub(obj: str, data: bytes) -> bytes:
        if obj.endswith(".jsonl"):
            return _scrub_jsonl(data, key, salt, trace_ids)
        if obj.endswith(".parquet"):
            return _scrub_parquet(data, key, salt, trace_ids)
        text = data.decode("utf-8", "replace")
        return text.replace(key, marker).encode() if key in text else data

    for obj in store.list():
        if (skip_prefix and obj.startswith(skip_prefix)) or not obj.endswith(SCRUBBED):
            continue
        done = scrub_object(store, obj, partial(scrub, obj))
        rewritten += done == "rewritten"
        deleted += done == "deleted"
    return rewritten, deleted


def scrub_object(store: ObjectStore, obj: str, scrub: Callable[[bytes], bytes]) -> str | None:
    """Rewrite one object as ``scrub`` turns its bytes, by compare-and-swap: read with its
    ETag, write only if nobody wrote since; a concurrent writer's object is read and scrubbed
    again (its new content is scrubbed too, never overwritten blindly). Returns ``rewritten``,
    ``deleted`` (nothing else was left) or None (nothing of the user, or gone)."""

    def read() -> tuple[bytes, str] | None:
        try:
            return store.get_versioned(obj)
        except ObjectNotFound:
            return None

    def decide(found: tuple[bytes, str] | None) -> bytes | None:
        if found is None or (new := scrub(found[0])) == found[0]:
            return None
        return new

    def write(found: tuple[bytes, str] | None, new: bytes) -> str:
        assert found is not None  # decide wrote nothing for a missing object
        if not new:  # the store has no conditional delete: check the ETag just before (the
            # writers that rewrite these objects hold the erasure lease this run holds alone)
            if read() != found:
                raise PreconditionFailed(f"{obj} changed while it was scrubbed")
            store.delete(obj)
            return "deleted"
        if not (obj.startswith(MODELS_PREFIX) and rewrite_published_file(store, obj, new)):
            store.put_if(obj, new, etag=found[1])  # a model's files are immutable once published
        return "rewritten"

    _found, done = compare_and_swap(
        read, decide, write, operation="erasure.scrub", retry_on=(PreconditionFailed,)
    )
    return done


def _scrub_jsonl(data: bytes, key: str, salt: str, trace_ids: set[str]) -> bytes:
    lines = data.decode("utf-8", "replace").splitlines()
    keep = [
        line
        for line in lines
        if _line_user(line, salt) != key
        and _json_field(line, "trace_id") not in trace_ids
        and key not in line
    ]
    if len(keep) == len(lines):
        return data
    return ("\n".join(keep) + "\n").encode() if keep else b""


def _scrub_parquet(data: bytes, key: str, salt: str, trace_ids: set[str]) -> bytes:
    table = pq.read_table(io.BytesIO(data))
    cols = set(table.column_names)

    def column(name: str) -> list[Any]:
        return table[name].to_pylist() if name in cols else [None] * table.num_rows

    drop = [
        k == key or (isinstance(u, str) and hash_user(u, salt) == key) or t in trace_ids
        for k, u, t in zip(column("user_key"), column("user_id"), column("trace_id"), strict=True)
    ]
    if not any(drop):
        return data
    kept = table.filter(pa.array([not d for d in drop]))
    if kept.num_rows == 0:
        return b""
    sink = io.BytesIO()
    pq.write_table(kept, sink)
    return sink.getvalue()


def erasure_details(result: Erasure) -> dict[str, Any]:
    """The counts of an erasure (rows, objects, snapshots, orphan files, Langfuse deletes) as a flat
    dict for the audit log and the run log."""
    return {
        "rows_deleted": result.rows_deleted,
        "objects_rewritten": result.objects_rewritten,
        "objects_deleted": result.objects_deleted,
        "snapshots_expired": result.snapshots_expired,
        "orphan_files_removed": result.orphan_files_removed,
        **result.langfuse_counts(),
    }


def erasure_markdown(title: str, result: Erasure) -> str:
    """A Prefect artifact body for an erasure or retention run (counts only)."""
    lines = [f"# {title}", ""]
    if result.receipt:
        lines += [f"Audit receipt: `{result.receipt}`", ""]
    lines += ["| table | rows deleted |", "|---|---:|"]
    lines += [f"| {name} | {n} |" for name, n in sorted(result.rows_deleted.items())]
    lines += [
        "",
        f"- objects rewritten: {result.objects_rewritten}",
        f"- objects deleted: {result.objects_deleted}",
        f"- snapshots expired: {result.snapshots_expired}",
        f"- unreferenced files removed: {result.orphan_files_removed}",
        f"- Langfuse trace deletes requested: {result.langfuse_traces_deleted} (confirmed "
        f"{result.langfuse_traces_confirmed}, pending {result.langfuse_traces_pending}, deferred "
        f"{result.langfuse_traces_deferred}; scores go with their traces)",
    ]
    if result.langfuse_rechecked_erasures:
        lines.append(
            f"- earlier erasures re-checked in Langfuse: {result.langfuse_rechecked_erasures} "
            f"(deletes confirmed now {result.langfuse_recheck_confirmed}, still pending "
            f"{result.langfuse_recheck_pending})"
        )
    return "\n".join(lines)


# --- Prefect tasks (thin wrappers; reruns are idempotent) --------------------------------


@task(**IO_RETRIES)
def user_traces_task(catalog: Catalog, store: ObjectStore, key: str, salt: str) -> set[str]:
    """Returns the user's trace ids."""
    return user_trace_ids(catalog, store, key, salt)


@task(**IO_RETRIES)
def delete_rows_task(catalog: Catalog, key: str, trace_ids: set[str]) -> dict[str, int]:
    """Returns rows deleted per table."""
    return delete_user_rows(catalog, key, trace_ids)


@task(**IO_RETRIES)
def scrub_objects_task(
    store: ObjectStore, key: str, salt: str, trace_ids: set[str], skip_prefix: str | None
) -> tuple[int, int]:
    """Returns (objects rewritten, objects deleted) outside the warehouse."""
    return scrub_objects(store, key=key, salt=salt, trace_ids=trace_ids, skip_prefix=skip_prefix)
