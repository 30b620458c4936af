"""Every object-store key and prefix of the storage layout (docs/reference/storage.md),
and window ids, in one place.

```
traces/dt=YYYY-MM-DD/hour=HH/<writer>-<seq>.jsonl    raw spool (embedded sink)
rollouts/window=<ISO start>/batch.parquet           stage 1 output
scores/window=<ISO start>/scores.parquet            stage 2 output
scores/cache/<ns>/<shard>.parquet                   judge/metric cache (hashes and numbers)
curate/held/window=<ISO start>/held.parquet         k-anonymity held-back rows
curate/dedup/index.parquet                          recent (conversation + answer) hashes
curate/coverage/<workload>.json                     the golden set's last coverage measure
models/<version>/                                   weights, tokenizer, model card, lineage
gates/<version>/                                    release gate evidence
deploy/state.json                                   routing state
deploy/servers.json                                 versions served on other bases' servers
gateway/keys.json                                   client API keys (hashed), their limits
metrics/<stage>.json                                cumulative stage counters
feedback/watermark.json                             late feedback read up to here
feedback/stale/<stage>/window=<ISO start>           windows to redo: feedback changed
governance/erased/<receipt>.json                    hashed trace ids erased under a receipt
governance/models/<receipt>.json                    the model side of an erasure (its case)
governance/langfuse_pending/<receipt>.json          Langfuse deletes not yet read back as gone
```
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from infra.errors import StoreError

TRACES_PREFIX = "traces/"
ROLLOUTS_PREFIX = "rollouts/"
SCORES_PREFIX = "scores/"
SCORES_CACHE_PREFIX = "scores/cache/"
HELD_PREFIX = "curate/held/"
DEDUP_INDEX_KEY = "curate/dedup/index.parquet"  # hashes and window ids only, never text
COVERAGE_PREFIX = "curate/coverage/"  # shares, tokens and trace ids, never text
MODELS_PREFIX = "models/"
GATES_PREFIX = "gates/"
METRICS_PREFIX = "metrics/"
STATE_KEY = "deploy/state.json"
# where versions on another base model's server (a distilled student's) are served
SERVERS_KEY = "deploy/servers.json"
# the public listener's client API keys: SHA-256 digests only, never a key itself
CLIENT_KEYS_KEY = "gateway/keys.json"
FEEDBACK_WATERMARK_KEY = "feedback/watermark.json"
STALE_PREFIX = "feedback/stale/"
ERASED_PREFIX = "governance/erased/"  # one ledger entry per forget-user (hashed trace ids)
# per receipt: the model versions an erasure reaches, their replacement and retirement
ERASURE_CASES_PREFIX = "governance/models/"
# per receipt: Langfuse trace ids whose delete a read-back has not confirmed yet (Langfuse
# queues deletes); opaque ids, kept only here, never in audit details, logs or parameters
LANGFUSE_PENDING_PREFIX = "governance/langfuse_pending/"

RAW_PREFIXES = (TRACES_PREFIX, ROLLOUTS_PREFIX, SCORES_PREFIX, HELD_PREFIX)
"""Prefixes that hold personal data or data derived from it (retention and erasure rewrite
them); ``scores/cache/`` holds hashes and numbers only but lives under ``scores/``."""

_VERSION = re.compile(r"^v(\d+)$")


def parse_window_start(value: str | datetime | None, *, now: datetime | None = None) -> datetime:
    """A window start on an hour boundary (UTC); ``None`` means the last closed hour."""
    if value is None:
        now = (now or datetime.now(UTC)).astimezone(UTC)
        return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    if value != value.replace(minute=0, second=0, microsecond=0):
        raise ValueError(f"window start {value.isoformat()} is not on an hour boundary")
    return value


def window_id(start: datetime) -> str:
    """The window's name in keys and tables, e.g. ``2026-11-22T10:00:00Z``."""
    return start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hour_prefix(at: datetime) -> str:
    """The spool prefix of the hour that holds ``at``."""
    at = at.astimezone(UTC)
    return f"{TRACES_PREFIX}dt={at:%Y-%m-%d}/hour={at:%H}/"


def rollouts_key(window: str) -> str:
    """``rollouts/window=<window>/batch.parquet``: the collected rollouts of a window."""
    return f"{ROLLOUTS_PREFIX}window={window}/batch.parquet"


def scores_key(window: str) -> str:
    """``scores/window=<window>/scores.parquet``: the scores of a window."""
    return f"{SCORES_PREFIX}window={window}/scores.parquet"


def cache_shard_key(namespace: str, shard: str) -> str:
    """``scores/cache/<namespace>/<shard>.parquet``: one shard of the score cache."""
    return f"{SCORES_CACHE_PREFIX}{namespace}/{shard}.parquet"


def held_key(window: str) -> str:
    """``curate/held/window=<window>/held.parquet``: the window's rows held back until
    k-anonymous."""
    return f"{HELD_PREFIX}window={window}/held.parquet"


def coverage_key(workload: str) -> str:
    """``curate/coverage/<workload>.json``: the last curate run's golden coverage measure."""
    return f"{COVERAGE_PREFIX}{workload}.json"


def model_prefix(version: str) -> str:
    """``models/<version>/``.

    Raises:
        StoreError: ``version`` is not ``v<number>`` (it could name a path outside models/).
    """
    if not _VERSION.match(version):
        raise StoreError(f"invalid model version {version!r} (expected v0, v1, ...)")
    return f"{MODELS_PREFIX}{version}/"


def version_number(version: str) -> int:
    """The number of ``v<number>``, -1 for anything else."""
    match = _VERSION.match(version)
    return int(match.group(1)) if match else -1


def gate_prefix(version: str) -> str:
    """``gates/<version>/``: the release gate's results for ``version``."""
    return f"{GATES_PREFIX}{version}/"


def metrics_key(stage: str) -> str:
    """``metrics/<stage>.json``: the stage's published metric state."""
    return f"{METRICS_PREFIX}{stage}.json"


def stale_prefix(stage: str) -> str:
    """``feedback/stale/<stage>/``: windows whose feedback changed, for ``stage`` to redo."""
    return f"{STALE_PREFIX}{stage}/"


def stale_key(stage: str, window: str) -> str:
    """The marker saying ``window``'s feedback changed and ``stage`` must redo it."""
    return f"{stale_prefix(stage)}window={window}"


def window_of_key(key: str) -> str | None:
    """The window id in a ``.../window=<id>/...`` key, None when it has none."""
    match = re.search(r"window=([^/]+)", key)
    return match.group(1) if match else None
