"""The stage outputs later stages read, in one place: their schemas, typed rows and readers
(rollouts, scores; the Iceberg tables' schemas are :data:`infra.catalog_schemas.SCHEMAS`),
quarantine rows, and consent. A later stage reads an earlier stage's output through this
module, never through the earlier stage's own module.

Each stage output has one schema (pyarrow) and one typed row (a ``TypedDict``) with exactly
its columns, so mypy checks every ``row["key"]``; ``tests/unit/test_typed_rows.py`` keeps the
two equal. Column names used outside a typed row (``table.column(...)``, scan filters) are
the constants below, each checked against the schemas when this module is imported."""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, NotRequired, TypedDict

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task

from infra.catalog_schemas import SCHEMAS
from infra.keys import rollouts_key, scores_key
from infra.task_retries import IO_RETRIES
from tasks.reward import COMPONENTS, RewardColumns, RewardValues

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.store import ObjectStore
    from infra.traces import RawLine

# ---- column names ---------------------------------------------------------------------------

TRACE_ID: Final = "trace_id"
PROMPT_GROUP: Final = "prompt_group"
MODEL_VERSION: Final = "model_version"
WINDOW: Final = "window"
USER_KEY: Final = "user_key"
WORKLOAD: Final = "workload"
REWARD: Final = "reward"
CREATED_AT: Final = "created_at"

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


class Rollout(TypedDict):
    """A ``ROLLOUT_SCHEMA`` row: one agent trace as collect wrote it (contains PII)."""

    trace_id: str
    session_id: str | None
    user_id: str | None
    user_key: str | None  # the salted hash of user_id
    workload: str | None  # None: a batch written before workloads existed
    prompt_group: str
    messages: str | None  # JSON: the OpenAI chat messages the model was sent
    question: str
    contexts: list[str]
    answer: str
    tool_calls: str | None  # JSON
    model_version: str
    temperature: float | None
    top_p: float | None
    latency_s: float
    tokens_in: int | None
    tokens_out: int | None
    finish_reason: str | None
    error_count: int
    feedback: int | None  # -1, 0, 1
    created_at: datetime
    route: str | None
    pairing_id: str | None
    logprobs: list[float] | None
    window: str


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

REWARD_COLUMNS: tuple[str, ...] = (REWARD, *[f"reward_{c}" for c in COMPONENTS])
"""The reward columns a score row hands on to ``training_examples``: the total, then each
component."""


class Score(RewardColumns):
    """A ``SCORE_SCHEMA`` row: a rollout's reward (:class:`~tasks.reward.RewardColumns`) and
    what it was computed with."""

    trace_id: str
    prompt_group: str
    model_version: str
    reward_config_hash: str
    judge_kind: str
    ragas_mode: str
    window: str


class TrainingExample(RewardValues):
    """A ``training_examples`` row (stage 3's output): an anonymised trace with its reward."""

    trace_id: str
    prompt_group: str
    user_key: str | None
    question: str
    contexts: list[str]
    answer: str
    reward_config_hash: str | None
    model_version: str
    pattern: str  # the k-anonymity key
    pii_entities: list[str]
    eligible_as: str  # "train" | "rejected_only"
    window: str
    created_at: datetime
    workload: str | None  # None: a row curated before workloads existed
    messages: str | None  # JSON: the anonymised conversation


class BufferedExample(TypedDict):
    """The ``training_examples`` columns stage 4 reads (:data:`BUFFER_COLUMNS`); a table
    created before issue 15 has no ``workload`` or ``messages``."""

    trace_id: str
    prompt_group: str
    user_key: str | None
    question: str
    contexts: list[str]
    answer: str
    reward: float
    reward_judge: float | None  # the judge's (verifier's) verdict: distillation keeps passed
    reward_config_hash: str | None
    eligible_as: str
    window: str
    created_at: datetime
    workload: NotRequired[str | None]
    messages: NotRequired[str | None]


BUFFER_COLUMNS: tuple[str, ...] = tuple(BufferedExample.__annotations__)
"""The ``training_examples`` columns stage 4 scans, in table order."""


class PreferencePair(TypedDict):
    """A ``preference_pairs`` row (stage 4): two answers of one prompt group and their rewards."""

    pair_id: str
    prompt_group: str
    prompt: str
    chosen: str
    rejected: str
    chosen_reward: float
    rejected_reward: float
    reward_diff: float
    windows: list[str]
    user_keys: list[str]
    train_run: str | None  # filled in when the pairs are written
    created_at: datetime


class EvalResult(TypedDict):
    """An ``eval_results`` row (stage 5): one golden item's score for one model version."""

    run_id: str
    model_version: str
    item_id: str
    slice: str
    score: float
    answer: str
    created_at: datetime


class Quarantine(TypedDict):
    """A ``quarantine`` row: a record a stage could not use, where it is, and why."""

    stage: str
    window: str
    reason: str
    record: str  # JSON pointer: object key and line or trace id, size, hash; never the text
    at: datetime


def _check_columns() -> None:
    """Raise at import when a column constant is not a column of the outputs it is used on."""
    examples = SCHEMAS["training_examples"]
    uses = [
        (ROLLOUT_SCHEMA, (TRACE_ID, PROMPT_GROUP, MODEL_VERSION, WINDOW, USER_KEY, WORKLOAD)),
        (SCORE_SCHEMA, (TRACE_ID, PROMPT_GROUP, MODEL_VERSION, WINDOW, *REWARD_COLUMNS)),
        (examples, (USER_KEY, WORKLOAD, CREATED_AT, *REWARD_COLUMNS, *BUFFER_COLUMNS)),
    ]
    for schema, columns in uses:
        if missing := [c for c in columns if schema.get_field_index(c) < 0]:
            raise RuntimeError(f"tasks.datasets: no column {missing} in {schema.names}")


_check_columns()


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


def quarantine_row(*, stage: str, window: str, reason: str, pointer: dict[str, Any]) -> Quarantine:
    """A ``quarantine`` table row. ``pointer`` locates the bad input (object key and line, or
    trace id) with its size and hash: never its text, which may hold personal data."""
    return Quarantine(
        stage=stage,
        window=window,
        reason=reason,
        record=json.dumps(pointer, sort_keys=True),
        at=datetime.now(UTC),
    )


def raw_line_pointer(line: RawLine) -> dict[str, Any]:
    """Where a raw trace line is (it stays there, so nothing is lost), its size and sha256."""
    payload = line.payload if isinstance(line.payload, bytes) else json.dumps(line.payload).encode()
    return {
        "source": line.source,
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }


def trace_pointer(row: Rollout | TrainingExample) -> dict[str, Any]:
    """A rollout (or example) row's trace id and a hash of its question and answer."""
    text = f"{row.get('question')}\x00{row.get('answer')}".encode()
    return {TRACE_ID: row.get(TRACE_ID), "sha256": hashlib.sha256(text).hexdigest()}


def replace_quarantine(catalog: Catalog, *, stage: str, window: str, rows: list[Quarantine]) -> int:
    """Replace the window's quarantine rows of ``stage`` (a rerun never duplicates); returns
    how many it now holds."""
    from pyiceberg.expressions import And, EqualTo

    from infra.catalog import replace_where

    where = And(EqualTo("stage", stage), EqualTo(WINDOW, window))
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
