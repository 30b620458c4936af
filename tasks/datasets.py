"""The stage outputs later stages read, in one place: their schemas and readers (rollouts,
scores), quarantine rows, and consent. A later stage reads an earlier stage's output through
this module, never through the earlier stage's own module."""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task

from infra.keys import rollouts_key, scores_key
from infra.retries import IO_RETRIES
from tasks.reward import COMPONENTS

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.store import ObjectStore
    from infra.traces import RawLine

ROLLOUT_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("session_id", pa.string()),
        ("user_id", pa.string()),
        ("user_key", pa.string()),
        ("workload", pa.string()),
        ("prompt_group", pa.string()),
        ("messages", pa.string()),  # JSON: the OpenAI chat messages the model was sent
        ("question", pa.string()),
        ("contexts", pa.list_(pa.string())),
        ("answer", pa.string()),
        ("tool_calls", pa.string()),
        ("model_version", pa.string()),
        ("temperature", pa.float64()),
        ("top_p", pa.float64()),
        ("latency_s", pa.float64()),
        ("tokens_in", pa.int64()),
        ("tokens_out", pa.int64()),
        ("finish_reason", pa.string()),
        ("error_count", pa.int64()),
        ("feedback", pa.int8()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("route", pa.string()),
        ("pairing_id", pa.string()),
        ("logprobs", pa.list_(pa.float64())),
        ("window", pa.string()),
    ]
)
"""Stage 1's output, ``rollouts/window=<start>/batch.parquet`` (contains PII)."""

SCORE_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("prompt_group", pa.string()),
        ("model_version", pa.string()),
        ("reward", pa.float64()),
        *[(f"reward_{c}", pa.float64()) for c in COMPONENTS],
        ("missing", pa.list_(pa.string())),
        ("reward_config_hash", pa.string()),
        ("judge_kind", pa.string()),
        ("ragas_mode", pa.string()),
        ("window", pa.string()),
        # what was not applicable (a subset of missing), and whether reward.required was met
        ("not_applicable", pa.list_(pa.string())),
        ("eligible", pa.bool_()),
        ("ineligible_reason", pa.string()),
        ("judge_status", pa.string()),
        ("judge_id", pa.string()),
    ]
)
"""Stage 2's output, ``scores/window=<start>/scores.parquet``: one row per rollout."""


def read_rollouts(store: ObjectStore, window: str) -> pa.Table:
    """Stage 1's output for a window (``ROLLOUT_SCHEMA``).

    Raises:
        ObjectNotFound: the window was not collected.
    """
    return pq.read_table(io.BytesIO(store.get(rollouts_key(window))))


def read_scores(store: ObjectStore, window: str) -> pa.Table:
    """Stage 2's output for a window (``SCORE_SCHEMA``), joined by stage 3 on ``trace_id``.

    Raises:
        ObjectNotFound: the window was not scored.
    """
    return pq.read_table(io.BytesIO(store.get(scores_key(window))))


# ---- quarantine -----------------------------------------------------------------------------


def quarantine_row(
    *, stage: str, window: str, reason: str, pointer: dict[str, Any]
) -> dict[str, Any]:
    """A ``quarantine`` table row. ``pointer`` locates the bad input (object key and line, or
    trace id) with its size and hash: never its text, which may hold personal data."""
    return {
        "stage": stage,
        "window": window,
        "reason": reason,
        "record": json.dumps(pointer, sort_keys=True),
        "at": datetime.now(UTC),
    }


def raw_line_pointer(line: RawLine) -> dict[str, Any]:
    """Where a raw trace line is (it stays there, so nothing is lost), its size and sha256."""
    payload = line.payload if isinstance(line.payload, bytes) else json.dumps(line.payload).encode()
    return {
        "source": line.source,
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }


def trace_pointer(row: dict[str, Any]) -> dict[str, Any]:
    """A rollout row's trace id and a hash of its question and answer."""
    text = f"{row.get('question')}\x00{row.get('answer')}".encode()
    return {"trace_id": row.get("trace_id"), "sha256": hashlib.sha256(text).hexdigest()}


def replace_quarantine(
    catalog: Catalog, *, stage: str, window: str, rows: list[dict[str, Any]]
) -> int:
    """Replace the window's quarantine rows of ``stage`` (a rerun never duplicates); returns
    how many it now holds."""
    from pyiceberg.expressions import And, EqualTo

    from infra.catalog import replace_where

    where = And(EqualTo("stage", stage), EqualTo("window", window))
    replace_where(catalog, "quarantine", where, rows)
    return len(rows)


replace_quarantine_task = task(**IO_RETRIES)(replace_quarantine)


# ---- consent --------------------------------------------------------------------------------


class Exclusions(set[str]):
    """The users whose rows must not be trained on, for ``key in exclusions`` checks.

    Iterating it (and ``len``) gives the users whose latest row withdraws consent (what an
    earlier window's rows are removed for); membership also answers for users who never
    consented in ``opt_in`` mode, for traces without a user (``None``) in ``opt_in`` mode, and
    for erased users (a tombstone newer than their latest grant), in either mode.
    """

    def __init__(
        self,
        withdrawn: set[str],
        *,
        mode: str,
        granted: dict[str, datetime],
        tombstones: dict[str, datetime],
    ) -> None:
        super().__init__(withdrawn)
        self.mode, self.granted, self.tombstones = mode, granted, tombstones

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or not key:
            return self.mode == "opt_in"
        if set.__contains__(self, key):
            return True
        from infra.consent import erasure_receipt

        erased = self.tombstones.get(erasure_receipt(key))
        granted = self.granted.get(key)
        if granted is not None and (erased is None or granted > erased):
            return False
        return erased is not None or self.mode == "opt_in"

    def __reduce__(self) -> Any:  # pickled by Prefect task runners
        return (
            _exclusions,
            (set(self), self.mode, self.granted, self.tombstones),
        )


def _exclusions(
    withdrawn: set[str], mode: str, granted: dict[str, datetime], tombstones: dict[str, datetime]
) -> Exclusions:
    return Exclusions(withdrawn, mode=mode, granted=granted, tombstones=tombstones)


def training_exclusions(catalog: Catalog, *, mode: str) -> Exclusions:
    """Who must not reach ``training_examples`` or preference pairs now (see
    :class:`Exclusions`); ``mode`` is FLYWHEEL_CONSENT_MODE (``opt_in`` or ``opt_out``)."""
    latest = _latest_consent(catalog)
    withdrawn = {k for k, (_at, ok) in latest.items() if not ok}
    granted = {k: at for k, (at, ok) in latest.items() if ok}
    # a tombstone is keyed by a receipt; receipts and keys never collide (both sha256 hex), so
    # every withdrawn row doubles as a possible tombstone
    tombstones = {k: at for k, (at, ok) in latest.items() if not ok}
    return Exclusions(withdrawn, mode=mode, granted=granted, tombstones=tombstones)


def _latest_consent(catalog: Catalog) -> dict[str, tuple[datetime, bool]]:
    from infra.catalog import scan

    table = scan(catalog, "consent")
    latest: dict[str, tuple[datetime, bool]] = {}
    for key, ok, at in zip(
        table.column("user_key").to_pylist(),
        table.column("consent_to_training").to_pylist(),
        table.column("updated_at").to_pylist(),
        strict=True,
    ):
        if key not in latest or at >= latest[key][0]:
            latest[key] = (at, bool(ok))
    return latest


def opted_out_keys(catalog: Catalog) -> set[str]:
    """User keys whose latest consent row says no (absent users count as consenting)."""
    return {key for key, (_at, ok) in _latest_consent(catalog).items() if not ok}
