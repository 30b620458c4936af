"""Stage 3 logic: quality gates, dedup, consent, anonymisation, k-anonymity, one Iceberg commit.

Order (cheap before expensive; nothing personal leaves this module un-anonymised):
consent -> gates (errors, latency, reward) -> dedup -> role (``train`` / ``rejected_only``)
-> Presidio on the survivors -> k-anonymity -> ``training_examples`` (replace the window).

k-anonymity holds back, it does not drop: a row whose question pattern has fewer than k
distinct users (counting the table, this window and rows still held) is written, already
anonymised, to ``curate/held/window=<w>/held.parquet``; every later run counts held rows too
and releases a group as soon as it reaches k (the released rows keep their own window and are
written in the releasing window's commit). Held rows older than the raw-retention period are
deleted by the retention flow.
"""

from __future__ import annotations

import io
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE
from pyiceberg.exceptions import CommitFailedException

from infra.errors import ObjectNotFound, TransientStoreError
from infra.keys import HELD_PREFIX, held_key, scores_key
from infra.retries import retry_on
from tasks.datasets import quarantine_row, read_rollouts, read_scores, trace_pointer
from tasks.pii import PiiConfig, anonymize_texts, load_engine, placeholder_pattern

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.settings import CurateSettings
    from infra.store import ObjectStore

STAGE = "curate"
REWARD_COLUMNS = (
    "reward",
    "reward_judge",
    "reward_faithfulness",
    "reward_context_recall",
    "reward_feedback",
    "reward_latency",
)
_ENGINE_LOCK = threading.Lock()
_PUNCT_EDGE = re.compile(r"^[\W_]+|[\W_]+$")


@dataclass
class Gated:
    """Rows that go on to anonymisation (with ``eligible_as`` set) and drops by reason."""

    kept: list[dict[str, Any]]
    dropped: Counter[str] = field(default_factory=Counter)


@dataclass
class KDecision:
    """What k-anonymity decided: rows to write, rows to hold, held rows released now."""

    release: list[dict[str, Any]]
    hold: list[dict[str, Any]]
    released_ids: list[str]
    patterns_held: int


@dataclass
class CurateResult:
    """Counts of one curate run (no personal data)."""

    window: str
    read: int
    written: int
    train: int
    rejected_only: int
    k_withheld: int
    released: int
    quarantined: int
    dropped: dict[str, int]
    pii_entities: dict[str, int]
    snapshot_id: int | None
    withdrawn: int = 0  # rows of earlier windows removed because consent was withdrawn


def read_window_scores(store: ObjectStore, window: str) -> pa.Table:
    """Stage 2's scores for the window (``scores/window=<w>/scores.parquet``).

    Raises:
        ObjectNotFound: the window has not been scored yet (run ``flywheel score``).
    """
    try:
        return read_scores(store, window)
    except ObjectNotFound as exc:
        raise ObjectNotFound(f"{scores_key(window)} (score the window before curating)") from exc


def join_scores(
    rollouts: pa.Table, scores: pa.Table
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rollout rows with their reward columns, and the rows that have no score row."""
    by_id = {row["trace_id"]: row for row in scores.to_pylist()}
    joined, unscored = [], []
    for row in rollouts.to_pylist():
        score = by_id.get(row["trace_id"])
        if score is None:
            unscored.append(row)
            continue
        row.update({c: score.get(c) for c in REWARD_COLUMNS})
        row["reward_config_hash"] = score.get("reward_config_hash")
        joined.append(row)
    return joined, unscored


def normalise(text: str) -> str:
    """Case, whitespace and edge punctuation folded: the dedup key of a text."""
    return _PUNCT_EDGE.sub("", " ".join(text.lower().split()))


def _fail_reason(row: dict[str, Any], cfg: CurateSettings) -> str | None:
    reward = row.get("reward")
    if reward is None or reward != reward:  # None or NaN
        return "no_reward"
    if (row.get("error_count") or 0) > cfg.max_errors:
        return "errors"
    if (row.get("latency_s") or 0.0) > cfg.max_latency_s:
        return "latency"
    if reward < cfg.min_reward:
        return "low_reward"
    return None


def apply_gates(rows: list[dict[str, Any]], cfg: CurateSettings, opted_out: set[str]) -> Gated:
    """Consent, quality gates and dedup; a sibling below the reward bar is kept as
    ``rejected_only`` when its prompt group has a ``train`` row (the training stage needs the
    low-reward answers), otherwise dropped as ``low_reward``."""
    out = Gated(kept=[])
    candidates = []
    for row in rows:
        reason = "opted_out" if row.get("user_key") in opted_out else _fail_reason(row, cfg)
        if reason in (None, "low_reward"):
            row["eligible_as"] = "train" if reason is None else "rejected_only"
            candidates.append(row)
        else:
            out.dropped[reason] += 1
    seen: set[tuple[str, str]] = set()
    unique = []
    ranked = sorted(candidates, key=lambda r: (-r["reward"], r["created_at"], r["trace_id"]))
    for row in ranked:
        key = (normalise(row["question"]), normalise(row["answer"]))
        if key in seen:
            out.dropped["duplicate"] += 1
            continue
        seen.add(key)
        unique.append(row)
    groups_with_train = {r["prompt_group"] for r in unique if r["eligible_as"] == "train"}
    for row in sorted(unique, key=lambda r: r["trace_id"]):
        if row["eligible_as"] == "train" or row["prompt_group"] in groups_with_train:
            out.kept.append(row)
        else:
            out.dropped["low_reward"] += 1
    return out


def chunked(rows: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)] or [[]]


def anonymize_rows(
    rows: list[dict[str, Any]], config: PiiConfig
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """training_examples rows (question, answer and contexts anonymised, ``pattern`` and
    ``pii_entities`` set) and quarantine rows for traces the analyzer could not process."""
    engine = load_engine(config)
    with _ENGINE_LOCK:  # one chunk at a time per process: spaCy/Presidio are not thread-safe
        return _anonymize_locked(engine, rows)


def _anonymize_locked(
    engine: Any, rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    try:
        return [
            _example(r, red) for r, red in zip(rows, _redact_rows(engine, rows), strict=True)
        ], []
    except Exception:  # noqa: BLE001 - isolate the record that breaks the batch
        pass
    good, bad = [], []
    for row in rows:
        try:
            good.append(_example(row, _redact_rows(engine, [row])[0]))
        except Exception as exc:  # noqa: BLE001 - quarantined with the error type only
            bad.append(quarantine_record(row, f"anonymisation failed: {type(exc).__name__}"))
    return good, bad


def _redact_rows(engine: Any, rows: list[dict[str, Any]]) -> list[list[Any]]:
    texts: list[str] = []
    for row in rows:
        texts += [row["question"], row["answer"], *(row.get("contexts") or [])]
    redactions = anonymize_texts(engine, texts)
    out, i = [], 0
    for row in rows:
        n = 2 + len(row.get("contexts") or [])
        out.append(redactions[i : i + n])
        i += n
    return out


def _example(row: dict[str, Any], red: list[Any]) -> dict[str, Any]:
    question, answer, contexts = red[0], red[1], red[2:]
    findings = sorted(e for r in red for e in r.entities)
    example = {c: row.get(c) for c in (*REWARD_COLUMNS, "reward_config_hash")}
    example.update(
        trace_id=row["trace_id"],
        prompt_group=row["prompt_group"],
        user_key=row.get("user_key"),
        question=question.text,
        contexts=[c.text for c in contexts],
        answer=answer.text,
        model_version=row["model_version"],
        pattern=placeholder_pattern(row["question"], question.spans),
        pii_entities=sorted(set(findings)),
        _pii_findings=findings,  # per-finding types for the metrics; not a table column
        eligible_as=row["eligible_as"],
        window=row["window"],
        created_at=row["created_at"],
    )
    return example


def quarantine_record(row: dict[str, Any], reason: str) -> dict[str, Any]:
    """A quarantine row naming the trace and a hash of its text, never the text itself."""
    return quarantine_row(
        stage=STAGE, window=row.get("window") or "", reason=reason, pointer=trace_pointer(row)
    )


def _member(row: dict[str, Any]) -> str:
    return row.get("user_key") or f"trace:{row['trace_id']}"


def k_anonymize(
    rows: list[dict[str, Any]],
    pending: list[dict[str, Any]],
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


@dataclass
class KState:
    """What k-anonymity and the commit need to know about earlier windows."""

    members: dict[str, set[str]]  # pattern -> distinct users in the table (other windows)
    in_table: set[str]  # every trace id in the table
    pending: list[dict[str, Any]]  # held rows of other windows not in the table yet
    withdrawn: int  # rows in the table whose user has since withdrawn consent


def k_state(catalog: Catalog, store: ObjectStore, window: str, opted_out: set[str]) -> KState:
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
    return KState(dict(members), in_table, pending, withdrawn)


def read_held(store: ObjectStore, *, exclude_window: str | None = None) -> list[dict[str, Any]]:
    """Every held row (optionally not those of one window)."""
    rows = []
    skip = held_key(exclude_window) if exclude_window else None
    for key in store.list(HELD_PREFIX):
        if key.endswith(".parquet") and key != skip:
            rows += pq.read_table(io.BytesIO(store.get(key))).to_pylist()
    return rows


def write_held(store: ObjectStore, window: str, rows: list[dict[str, Any]]) -> None:
    """Replace the window's held rows (deleting the object when none are held)."""
    if rows:
        store.put(held_key(window), _parquet(sorted(rows, key=lambda r: r["trace_id"])))
    else:
        store.delete(held_key(window))


def prune_held(store: ObjectStore, in_table: set[str], opted_out: set[str]) -> int:
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


def _parquet(rows: list[dict[str, Any]]) -> bytes:
    from infra.catalog import to_arrow

    sink = io.BytesIO()
    pq.write_table(to_arrow("training_examples", rows), sink)
    return sink.getvalue()


def commit_examples(
    catalog: Catalog,
    window: str,
    rows: list[dict[str, Any]],
    released_ids: list[str],
    opted_out: set[str] | None = None,
) -> int | None:
    """In one commit: replace the window's rows, write released held rows, and remove every
    row of users who withdrew consent; returns the table's snapshot id after the commit."""
    from pyiceberg.expressions import EqualTo, In, Or

    from infra.catalog import current_snapshot_id, replace_where

    row_filter: Any = EqualTo("window", window)
    if released_ids:
        row_filter = Or(row_filter, In("trace_id", released_ids))
    if opted_out:
        row_filter = Or(row_filter, In("user_key", sorted(opted_out)))
    replace_where(
        catalog, "training_examples", row_filter, sorted(rows, key=lambda r: r["trace_id"])
    )
    return current_snapshot_id(catalog, "training_examples")


def audit_events(
    window: str,
    *,
    dropped: Counter[str],
    pii: Counter[str],
    decision: KDecision,
    k: int,
    written: int,
    withdrawn: int = 0,
) -> list[dict[str, Any]]:
    """One audit row per decision kind (counts only)."""
    from infra.audit import audit_row

    def event(kind: str, details: dict[str, Any]) -> dict[str, Any]:
        return audit_row(event_type=f"curate.{kind}", actor=STAGE, subject=window, details=details)

    return [
        event("pii_found", dict(sorted(pii.items()))),
        event("dropped", dict(sorted(dropped.items()))),
        event(
            "k_withheld",
            {
                "k": k,
                "withheld": len(decision.hold),
                "patterns_withheld": decision.patterns_held,
                "released_from_earlier_windows": len(decision.released_ids),
            },
        ),
        event("committed", {"rows": written, "removed_consent_withdrawn": withdrawn}),
    ]


def count_entities(rows: Iterable[dict[str, Any]]) -> Counter[str]:
    """Entities removed, by type (one per finding)."""
    return Counter(e for r in rows for e in r.get("_pii_findings", r["pii_entities"]))


# --- Prefect tasks (thin wrappers; retries only for transient I/O) ------------------------


_IO: dict[str, Any] = {
    "retries": 3,
    "retry_delay_seconds": [2, 5, 15],
    "retry_jitter_factor": 0.5,
    "cache_policy": NO_CACHE,
    "retry_condition_fn": retry_on(
        TransientStoreError, CommitFailedException, ConnectionError, TimeoutError
    ),
}


@task(**_IO)
def load_inputs_task(store: ObjectStore, window: str) -> tuple[pa.Table, pa.Table]:
    """Returns the window's rollouts and scores."""
    return read_rollouts(store, window), read_window_scores(store, window)


@task(cache_policy=NO_CACHE)
def anonymize_task(
    rows: list[dict[str, Any]], config: PiiConfig
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Returns anonymised training_examples rows and quarantine rows for one chunk."""
    return anonymize_rows(rows, config)


@task(**_IO)
def k_state_task(catalog: Catalog, store: ObjectStore, window: str, opted_out: set[str]) -> KState:
    """Returns the table's patterns and trace ids and the still-held rows of other windows."""
    return k_state(catalog, store, window, opted_out)


@task(**_IO)
def commit_task(
    catalog: Catalog,
    window: str,
    rows: list[dict[str, Any]],
    released_ids: list[str],
    opted_out: set[str],
) -> int | None:
    """Returns the training_examples snapshot id after replacing the window in one commit."""
    return commit_examples(catalog, window, rows, released_ids, opted_out)


@task(**_IO)
def held_task(
    store: ObjectStore,
    window: str,
    hold: list[dict[str, Any]],
    in_table: set[str],
    opted_out: set[str],
) -> int:
    """Returns how many held rows of other windows were pruned (released or withdrawn)."""
    write_held(store, window, hold)
    return prune_held(store, in_table, opted_out)


@task(**_IO)
def audit_task(catalog: Catalog, rows: list[dict[str, Any]]) -> int:
    """Returns how many audit events were appended."""
    from infra.catalog import append_rows

    append_rows(catalog, "audit_log", rows)
    return len(rows)
