"""Stage 3's first, cheap steps: join the window's rollouts with their scores, then consent,
quality gates (errors, latency, reward) and dedup; every survivor gets ``eligible_as``
(``train``, or ``rejected_only`` for a low-reward sibling of a ``train`` row)."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
from prefect import task

from infra.errors import ObjectNotFound
from infra.keys import scores_key
from infra.task_retries import IO_RETRIES
from infra.traces.conversation import Messages, conversation_key, legacy_messages
from tasks.curate.rows import Candidate
from tasks.datasets import (
    REWARD_COLUMNS,
    TRACE_ID,
    Quarantine,
    Rollout,
    quarantine_row,
    read_rollouts,
    read_scores,
    trace_pointer,
)

if TYPE_CHECKING:
    from infra.settings import CurateSettings
    from infra.store import ObjectStore

STAGE = "curate"
_PUNCT_EDGE = re.compile(r"^[\W_]+|[\W_]+$")


@dataclass(kw_only=True)
class Gated:
    """Rows that go on to anonymisation (with ``eligible_as`` set) and drops by reason."""

    kept: list[Candidate]
    dropped: Counter[str] = field(default_factory=Counter)
    # the "reward_incomplete" drops by stage 2's reason (which names the judge)
    ineligible: Counter[str] = field(default_factory=Counter)


def read_window_scores(store: ObjectStore, window: str) -> pa.Table:
    """Stage 2's scores for the window (``scores/window=<w>/scores.parquet``).

    Raises:
        ObjectNotFound: the window has not been scored yet (run ``flywheel score``).
    """
    try:
        return read_scores(store, window)
    except ObjectNotFound as exc:
        raise ObjectNotFound(f"{scores_key(window)} (score the window before curating)") from exc


def join_scores(rollouts: pa.Table, scores: pa.Table) -> tuple[list[Candidate], list[Rollout]]:
    """Rollout rows with their reward columns, and the rows that have no score row."""
    by_id = {row[TRACE_ID]: row for row in scores.to_pylist()}
    joined: list[Candidate] = []
    unscored: list[Rollout] = []
    for row in rollouts.to_pylist():
        score = by_id.get(row[TRACE_ID])
        if score is None:
            unscored.append(row)
            continue
        row.update({c: score.get(c) for c in REWARD_COLUMNS})
        row["reward_config_hash"] = score.get("reward_config_hash")
        # scores written before eligibility existed have no column: eligible as then
        row["reward_eligible"] = score.get("eligible") is not False
        row["reward_ineligible_reason"] = score.get("ineligible_reason")
        joined.append(row)
    return joined, unscored


def normalise(text: str) -> str:
    """Case, whitespace and edge punctuation folded: the dedup key of a text."""
    return _PUNCT_EDGE.sub("", " ".join(text.lower().split()))


def row_messages(row: Rollout) -> Messages:
    """A rollout row's conversation (JSON in the column; an old row's built from its question
    and contexts)."""
    raw = row.get("messages")
    messages = json.loads(raw) if isinstance(raw, str) else raw
    if isinstance(messages, list) and messages:
        return messages
    return legacy_messages(row.get("question") or "", list(row.get("contexts") or []))


def dedup_key(row: Rollout) -> str:
    """The row's conversation and answer, folded by :func:`normalise`, as one hash."""
    return conversation_key(row_messages(row), row.get("answer") or "", fold=normalise)


def _fail_reason(row: Candidate, cfg: CurateSettings) -> str | None:
    reward = row.get("reward")
    if reward is None or reward != reward:  # None or NaN
        return "no_reward"
    if row.get("reward_eligible") is False:  # a component reward.required asks for is missing
        return "reward_incomplete"
    if cfg.drop_thumbs_down and row.get("feedback") == -1:
        return "thumbs_down"
    if (row.get("error_count") or 0) > cfg.max_errors:
        return "errors"
    if (row.get("latency_s") or 0.0) > cfg.max_latency_s:
        return "latency"
    if reward < cfg.min_reward:
        return "low_reward"
    return None


def apply_gates(
    rows: list[Candidate],
    cfg: CurateSettings,
    *,
    opted_out: set[str],
    seen_before: set[str] | None = None,
) -> Gated:
    """Consent, quality gates and dedup by conversation + answer (within the window, and
    against ``seen_before``: the keys of recent earlier windows, see
    :mod:`tasks.curate.dedup`); a sibling below the reward bar is kept as ``rejected_only``
    when its prompt group has a ``train`` row (the training stage needs the low-reward
    answers), otherwise dropped as ``low_reward``. Each kept row carries its ``_dedup_key``."""
    out = Gated(kept=[])
    candidates = []
    for row in rows:
        reason = "opted_out" if row.get("user_key") in opted_out else _fail_reason(row, cfg)
        if reason in (None, "low_reward"):
            row["eligible_as"] = "train" if reason is None else "rejected_only"
            candidates.append(row)
        else:
            out.dropped[reason] += 1
            if reason == "reward_incomplete":
                out.ineligible[row.get("reward_ineligible_reason") or "unknown"] += 1
    seen: set[str] = set()
    earlier = seen_before or set()
    unique = []
    ranked = sorted(candidates, key=lambda r: (-r["reward"], r["created_at"], r["trace_id"]))
    for row in ranked:
        key = dedup_key(row)
        if key in seen or key in earlier:
            out.dropped["duplicate" if key in seen else "duplicate_earlier_window"] += 1
            continue
        seen.add(key)
        row["_dedup_key"] = key
        unique.append(row)
    groups_with_train = {r["prompt_group"] for r in unique if r["eligible_as"] == "train"}
    for row in sorted(unique, key=lambda r: r["trace_id"]):
        if row["eligible_as"] == "train" or row["prompt_group"] in groups_with_train:
            out.kept.append(row)
        else:
            out.dropped["low_reward"] += 1
    return out


def quarantine_record(row: Rollout, reason: str) -> Quarantine:
    """A quarantine row naming the trace and a hash of its text, never the text itself."""
    return quarantine_row(
        stage=STAGE, window=row.get("window") or "", reason=reason, pointer=trace_pointer(row)
    )


@task(**IO_RETRIES)
def load_inputs_task(store: ObjectStore, window: str) -> tuple[pa.Table, pa.Table]:
    """Returns the window's rollouts and scores."""
    return read_rollouts(store, window), read_window_scores(store, window)
