"""Model lineage: ``lineage.json`` and ``model_card.yaml`` of a trained version, and the answer
to "which checkpoints saw this user's data?" (``flywheel lineage --user USER_ID``).

``lineage.json`` names the ``training_examples`` snapshot the run read and the trace ids it
trained on, so ``scan(training_examples, snapshot_id=...)`` restricted to those ids is exactly
the training data (Iceberg time travel; :func:`training_rows`). It also keeps the salted user
keys of those rows, which answers the user question after the snapshot has been expired.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from prefect import task
from prefect.cache_policies import NO_CACHE

from infra import models
from infra.errors import ObjectNotFound

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

    from infra.settings import Settings
    from infra.store import ObjectStore
    from tasks.pairs import Selection
    from tasks.train import MethodChoice, TrainConfig, TrainOutcome

log = logging.getLogger(__name__)

LINEAGE = "lineage.json"
CARD = "model_card.yaml"


def pick_base_version(store: ObjectStore) -> str:
    """The stable version of the routing state when it exists, else the newest version.

    Raises:
        ObjectNotFound: no model version exists (run ``flywheel bootstrap`` first).
    """
    from infra.errors import ObjectNotFound
    from infra.models import list_versions, version_exists
    from infra.routing import load_state

    stable = load_state(store).stable
    if stable and version_exists(store, stable):
        return stable
    versions = list_versions(store)
    if not versions:
        raise ObjectNotFound("no model version in the store; run `flywheel bootstrap` first")
    return versions[-1]


@task(retries=2, retry_delay_seconds=[2, 10], cache_policy=NO_CACHE)
def fetch_base_task(store: ObjectStore, version: str, cache_root: Path) -> Path:
    """Returns the local directory of the base model version."""
    from infra.models import fetch_model

    return fetch_model(store, version, cache_root)


def evaluate_golden_dirs(base_dir: Path, new_dir: Path) -> dict[str, Any]:
    """Greedy golden accuracy of the base and the new model (the same items, the same decoding)."""
    from infra.local_lm import LocalLM
    from tasks.bootstrap import evaluate_golden
    from tasks.domain import load_golden

    golden = load_golden()
    base, _ = evaluate_golden(LocalLM.load(base_dir), golden)
    new, _ = evaluate_golden(LocalLM.load(new_dir), golden)
    return {
        "golden_items": len(golden),
        "base_accuracy": base,
        "accuracy": new,
        "decoding": "greedy",
    }


@task(cache_policy=NO_CACHE)
def evaluate_task(base_dir: Path, new_dir: Path) -> dict[str, Any]:
    """Returns the golden accuracy of the base and the trained model."""
    return evaluate_golden_dirs(base_dir, new_dir)


def trained_rows(selection: Selection, method: str) -> tuple[list[str], list[str]]:
    """(trace ids, user keys) of the rows a method trains on: both sides of each pair for
    dpo, the chosen answers for rft, one prompt per group for grpo."""
    if method == "dpo":
        ids = {t for p in selection.pairs for t in p["_trace_ids"]}
        keys = {k for p in selection.pairs for k in p["user_keys"]}
    else:
        items = selection.sft if method == "rft" else selection.prompts
        ids = {s["trace_id"] for s in items}
        keys = {s["user_key"] for s in items if s.get("user_key")}
    return sorted(ids), sorted(keys)


def digest(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def build_lineage(
    *,
    base_version: str,
    train_run: str,
    choice: MethodChoice,
    config: TrainConfig,
    selection: Selection,
    pairs_snapshot_id: int | None,
    consent_snapshot_id: int | None,
    outcome: TrainOutcome,
    evaluation: dict[str, Any],
    settings: Settings,
    started_at: datetime,
) -> dict[str, Any]:
    """Everything needed to explain (and reproduce) a checkpoint; no personal data."""
    method = config.method
    ids, keys = trained_rows(selection, method)
    cur = settings.curate
    return {
        "version": None,  # set by publish_checkpoint
        "base_version": base_version,
        "train_run": train_run,
        "method": method,
        "method_reason": choice.reason,
        "hyperparameters": config.hyperparameters(),
        "data": {
            "training_examples": {
                "snapshot_ids": [selection.snapshot_id],
                "windows": selection.windows,
                "trace_ids": ids,
                "trace_ids_sha256": digest(ids),
                "rows": len(ids),
            },
            "preference_pairs": None
            if pairs_snapshot_id is None
            else {
                "snapshot_id": pairs_snapshot_id,
                "train_run": train_run,
                "pairs": len(selection.pairs),
            },
            "pairs": len(selection.pairs),
            "selection": selection.counts,
            "decontaminated": selection.counts.get("decontaminated", 0),
            "reward_config_hashes": selection.reward_config_hashes,
            "user_keys": keys,
        },
        "privacy": {
            "pii_filter_version": cur.pii_filter_version,
            "pii_entities": list(cur.entities),
            "pii_operator": cur.operator,
            "pii_score_threshold": cur.score_threshold,
            "k_anonymity": cur.k_anonymity,
            "consent_snapshot_id": consent_snapshot_id,
        },
        "metrics": outcome.metrics,
        "evaluation": evaluation,
        "hardware": outcome.hardware,
        "wall_s": round(outcome.wall_s, 1),
        "started_at": started_at.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
    }


def model_card(lineage: dict[str, Any]) -> dict[str, Any]:
    """The human-readable summary of ``lineage`` (``model_card.yaml``)."""
    data, ev, metrics = lineage["data"], lineage["evaluation"], lineage["metrics"]
    return {
        "model": "flywheel preference-tuned model",
        "version": lineage["version"],
        "base_version": lineage["base_version"],
        "training": {
            "method": lineage["method"],
            "why": lineage["method_reason"],
            "hyperparameters": lineage["hyperparameters"],
            "pairs": data["pairs"],
            "rows": data["training_examples"]["rows"],
            "windows": data["training_examples"]["windows"],
            "decontaminated_golden_rows": data["decontaminated"],
            "users": len(data["user_keys"]),
        },
        "data_snapshots": {
            "training_examples": data["training_examples"]["snapshot_ids"],
            "preference_pairs": (data["preference_pairs"] or {}).get("snapshot_id"),
            "consent": lineage["privacy"]["consent_snapshot_id"],
        },
        "reward_config_hashes": data["reward_config_hashes"],
        "privacy": {k: v for k, v in lineage["privacy"].items() if k != "consent_snapshot_id"},
        "metrics": {k: round(v, 4) for k, v in metrics.items()},
        "evaluation": ev,
        "hardware": lineage["hardware"],
        "wall_s": lineage["wall_s"],
        "created_at": lineage["finished_at"],
        "intended_use": "candidate for the release gate; promoted only if it passes",
    }


def publish_checkpoint(store: ObjectStore, model_dir: Path, lineage: dict[str, Any]) -> str:
    """Write lineage.json and model_card.yaml into ``model_dir`` and publish it as the next
    version (atomic: visible only once complete). Returns the version name."""
    version = models.next_version(store)
    lineage = {**lineage, "version": version}
    (model_dir / LINEAGE).write_text(json.dumps(lineage, indent=2, sort_keys=True, default=str))
    (model_dir / CARD).write_text(yaml.safe_dump(model_card(lineage), sort_keys=False))
    models.publish_model_dir(store, version, model_dir)
    return version


@task(retries=2, retry_delay_seconds=[2, 10], cache_policy=NO_CACHE)
def publish_task(store: ObjectStore, model_dir: Path, lineage: dict[str, Any]) -> str:
    """Returns the version name the checkpoint was published as."""
    return publish_checkpoint(store, model_dir, lineage)


def training_rows(catalog: Catalog, lineage: dict[str, Any]) -> pa.Table:
    """The rows a version trained on, read back by Iceberg time travel.

    Raises:
        ValueError: the snapshot no longer exists (expired) or rows are missing from it.
    """
    from pyiceberg.expressions import In

    from infra.catalog import get_table

    te = lineage["data"]["training_examples"]
    ids = list(te["trace_ids"])
    table = get_table(catalog, "training_examples")
    parts = []
    for sid in te["snapshot_ids"]:
        if table.snapshot_by_id(sid) is None:
            raise ValueError(f"snapshot {sid} of training_examples no longer exists")
        parts.append(table.scan(row_filter=In("trace_id", ids), snapshot_id=sid).to_arrow())
    import pyarrow as pa

    rows = pa.concat_tables(parts) if parts else table.scan(limit=0).to_arrow()
    found = set(rows.column("trace_id").to_pylist())
    if found != set(ids):
        raise ValueError(f"{len(set(ids) - found)} trained rows are missing from the snapshot")
    return rows


@dataclass
class UserLineage:
    """Which versions trained on a user's data, and how each was established."""

    versions: list[str]
    evidence: dict[str, str]  # version -> "time-travel" | "lineage.json"


def versions_trained_on(store: ObjectStore, catalog: Catalog, key: str) -> UserLineage:
    """Versions whose training data held rows of the user with salted key ``key``: by time
    travel to each version's snapshot (the trained trace ids with that user key), or from the
    user keys recorded in lineage.json when the snapshot has been expired."""
    from pyiceberg.expressions import EqualTo

    from infra.catalog import get_table

    table = get_table(catalog, "training_examples")
    hits: dict[str, str] = {}
    for version in models.list_versions(store):
        try:
            lineage = models.read_model_json(store, version, LINEAGE)
        except ObjectNotFound:
            continue
        te = (lineage.get("data") or {}).get("training_examples")
        if not te:
            continue  # the bootstrap model: synthetic data only
        ids, sids = set(te["trace_ids"]), te["snapshot_ids"]
        if all(table.snapshot_by_id(s) is not None for s in sids):
            for sid in sids:
                rows = table.scan(
                    row_filter=EqualTo("user_key", key),
                    selected_fields=("trace_id",),
                    snapshot_id=sid,
                ).to_arrow()
                if ids & set(rows.column("trace_id").to_pylist()):
                    hits[version] = "time-travel"
        elif key in set(lineage["data"].get("user_keys", [])):
            hits[version] = "lineage.json"
    ordered = [v for v in models.list_versions(store) if v in hits]
    return UserLineage(ordered, hits)


def lineage_for_user(user_id: str, settings: Settings | None = None) -> UserLineage:
    """``flywheel lineage --user USER_ID``: the raw id is hashed with the salt, never stored."""
    from infra.catalog import open_catalog
    from infra.privacy import user_key
    from infra.settings import get_settings
    from infra.store import open_store

    settings = settings or get_settings()
    key = user_key(user_id, settings.salt())
    return versions_trained_on(open_store(settings), open_catalog(settings), key)


def card_markdown(lineage: dict[str, Any]) -> str:
    """The train run's artifact: the model card's essentials as markdown."""
    data, ev, m = lineage["data"], lineage["evaluation"], lineage["metrics"]
    rows = [
        ("version", f"{lineage['version']} (base {lineage['base_version']})"),
        ("method", f"{lineage['method']} - {lineage['method_reason']}"),
        ("pairs / rows trained on", f"{data['pairs']} / {data['training_examples']['rows']}"),
        ("golden rows excluded", data["decontaminated"]),
        ("golden accuracy", f"{ev.get('base_accuracy', float('nan')):.3f} -> {ev.get('accuracy', float('nan')):.3f}"),
        ("final loss", f"{m.get('loss', float('nan')):.4f}"),
        ("reward margin / preference accuracy", f"{m.get('rewards/margins', float('nan')):.3f} / {m.get('rewards/accuracies', float('nan')):.3f}"),
        ("training_examples snapshot", data["training_examples"]["snapshot_ids"]),
        ("preference_pairs snapshot", (data["preference_pairs"] or {}).get("snapshot_id")),
        ("consent snapshot", lineage["privacy"]["consent_snapshot_id"]),
        ("PII filter", lineage["privacy"]["pii_filter_version"]),
        ("hardware / wall", f"{lineage['hardware']} / {lineage['wall_s']} s"),
    ]  # fmt: skip
    lines = [f"# train {lineage['version']}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)
