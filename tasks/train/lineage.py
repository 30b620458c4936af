"""Model lineage: ``lineage.json`` and ``model_card.yaml`` of a trained version, and its
training rows read back (the answer to "which checkpoints saw this user's data?" is
tasks/train/user_lineage.py).

``lineage.json`` names the ``training_examples`` snapshot the run read and the trace ids it
trained on, so ``scan(training_examples, snapshot_id=...)`` restricted to those ids is exactly
the training data (Iceberg time travel; :func:`training_rows`). It also keeps the salted user
keys of those rows, which answers the user question after the snapshot has been expired.

:class:`Lineage` is the typed form of ``lineage.json``: :func:`lineage_files` writes it (keys
sorted, two-space indent) and ``Lineage.model_validate_json`` reads it back (writing that again
gives the same file, byte for byte).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, field_serializer

from infra.serving import models
from infra.serving.causal_lm import adapter_base, is_adapter

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

    from infra.settings import CurateSettings, Settings
    from infra.store import ObjectStore
    from tasks.train.config import TrainConfig
    from tasks.train.pairs import Selection
    from tasks.train.plan import TrainRun
    from tasks.train.trainer import TrainOutcome

LINEAGE = "lineage.json"
CARD = "model_card.yaml"
_RECORD = ConfigDict(extra="forbid", frozen=True)  # a field unknown here would be lost on save


class TrainedRows(BaseModel):
    """The ``training_examples`` rows a version trained on: ids at the snapshots they were read."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    snapshot_ids: list[int]
    trace_ids: list[str]


class TrainingExamples(TrainedRows):
    """``data.training_examples`` of lineage.json."""

    model_config = _RECORD

    windows: list[str]
    trace_ids_sha256: str
    rows: int


class PairsSnapshot(BaseModel):
    """``data.preference_pairs``: the run's pairs in ``flywheel.preference_pairs`` (dpo only)."""

    model_config = _RECORD

    snapshot_id: int
    train_run: str
    pairs: int


class TrainingData(BaseModel):
    """``data``: what the run read and selected (counts, ids and salted keys; no text)."""

    model_config = _RECORD

    training_examples: TrainingExamples
    preference_pairs: PairsSnapshot | None
    pairs: int
    selection: dict[str, int]
    decontaminated: int
    reward_config_hashes: list[str]
    user_keys: list[str]

    @property
    def pairs_snapshot_id(self) -> int | None:
        """The preference_pairs snapshot holding this run's pairs, if any."""
        return self.preference_pairs.snapshot_id if self.preference_pairs else None


class Privacy(BaseModel):
    """``privacy``: the stage-3 settings the training rows went through."""

    model_config = _RECORD

    pii_filter_version: str
    pii_entities: list[str]
    pii_operator: str
    pii_score_threshold: float
    k_anonymity: int
    consent_snapshot_id: int | None

    @classmethod
    def of(cls, curate: CurateSettings, consent_snapshot_id: int | None) -> Privacy:
        """The stage-3 settings ``curate`` as the lineage records them."""
        return cls(
            pii_filter_version=curate.pii_filter_version,
            pii_entities=list(curate.entities),
            pii_operator=curate.operator,
            pii_score_threshold=curate.score_threshold,
            k_anonymity=curate.k_anonymity,
            consent_snapshot_id=consent_snapshot_id,
        )


class Evaluation(BaseModel):
    """``evaluation``: greedy golden accuracy of the base and the trained model."""

    model_config = _RECORD

    golden_items: int
    base_accuracy: float
    accuracy: float
    decoding: str


class Lineage(BaseModel):
    """Everything needed to explain (and reproduce) a checkpoint; no personal data."""

    model_config = _RECORD

    version: str | None  # set when the checkpoint is published
    base_version: str
    train_run: str
    method: str
    method_reason: str
    hyperparameters: dict[str, Any]
    data: TrainingData
    privacy: Privacy
    metrics: dict[str, float]
    evaluation: Evaluation
    hardware: str
    wall_s: float
    started_at: datetime
    finished_at: datetime
    base_model: str | None = None  # a LoRA adapter: the full version it applies to
    workload: str | None = None  # trained on this workload's rows only (None: every workload)
    # a distilled student (tasks/distil): its profile, shape and size beside the teacher's
    # (``base_version`` is the teacher: an erasure reaching it reaches the student too)
    student: dict[str, Any] | None = None

    @field_serializer("started_at", "finished_at")
    def _isoformat(self, value: datetime) -> str:
        return value.isoformat()


def trained_rows(selection: Selection, method: str) -> tuple[list[str], list[str]]:
    """(trace ids, user keys) of the rows a method trains on: both sides of each pair for
    dpo, the chosen answers for rft, one prompt per group for grpo."""
    if method == "dpo":
        ids = {t for p in selection.pairs for t in p["_trace_ids"]}
        keys = {k for p in selection.pairs for k in p["user_keys"]}
    else:
        items = selection.sft if method == "rft" else selection.prompts
        ids = {s["trace_id"] for s in items}
        keys = {k for s in items if (k := s["user_key"])}
    return sorted(ids), sorted(keys)


def digest(ids: list[str]) -> str:
    """A hash of a set of ids (order does not matter)."""
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def training_data(
    selection: Selection,
    method: str,
    *,
    preference_pairs: PairsSnapshot | None,
    pairs: int,
) -> TrainingData:
    """``data``: the rows (and user keys) ``method`` learned from in ``selection``."""
    ids, keys = trained_rows(selection, method)
    return TrainingData(
        training_examples=TrainingExamples(
            # no snapshot means an empty table: nothing to train on, so never reached in a run
            snapshot_ids=[] if selection.snapshot_id is None else [selection.snapshot_id],
            windows=selection.windows,
            trace_ids=ids,
            trace_ids_sha256=digest(ids),
            rows=len(ids),
        ),
        preference_pairs=preference_pairs,
        pairs=pairs,
        selection=selection.counts,
        decontaminated=selection.counts.get("decontaminated", 0),
        reward_config_hashes=selection.reward_config_hashes,
        user_keys=keys,
    )


def build_lineage(
    run: TrainRun,
    *,
    config: TrainConfig,
    pairs_snapshot_id: int | None,
    consent_snapshot_id: int | None,
    outcome: TrainOutcome,
    evaluation: Evaluation,
    settings: Settings,
) -> Lineage:
    """The lineage of a checkpoint ``run`` trained (its id, base version, method choice,
    selection and start), before it is published (``version`` unset)."""
    base_version, train_run, choice = run.base, run.run_id, run.choice
    selection, started_at = run.selection, run.started
    pairs = None
    if pairs_snapshot_id is not None:
        pairs = PairsSnapshot(
            snapshot_id=pairs_snapshot_id, train_run=train_run, pairs=len(selection.pairs)
        )
    data = training_data(
        selection, config.method, preference_pairs=pairs, pairs=len(selection.pairs)
    )
    privacy = Privacy.of(settings.curate, consent_snapshot_id)
    return Lineage(
        version=None,
        base_version=base_version,
        train_run=train_run,
        method=config.method,
        method_reason=choice.reason,
        hyperparameters=config.hyperparameters(),
        data=data,
        privacy=privacy,
        metrics=outcome.metrics,
        evaluation=evaluation,
        hardware=outcome.hardware,
        wall_s=round(outcome.wall_s, 1),
        started_at=started_at,
        finished_at=datetime.now(UTC),
        base_model=adapter_base(outcome.output_dir) if is_adapter(outcome.output_dir) else None,
        workload=selection.workload,
    )


def model_card(lineage: Lineage) -> dict[str, Any]:
    """The human-readable summary of ``lineage`` (``model_card.yaml``)."""
    data = lineage.data
    examples = data.training_examples
    card: dict[str, Any] = {
        "model": "flywheel preference-tuned model",
        "version": lineage.version,
        "base_version": lineage.base_version,
        "training": {
            "method": lineage.method,
            "why": lineage.method_reason,
            "hyperparameters": lineage.hyperparameters,
            "pairs": data.pairs,
            "rows": examples.rows,
            "windows": examples.windows,
            "decontaminated_golden_rows": data.decontaminated,
            "users": len(data.user_keys),
        },
        "data_snapshots": {
            "training_examples": examples.snapshot_ids,
            "preference_pairs": data.pairs_snapshot_id,
            "consent": lineage.privacy.consent_snapshot_id,
        },
        "reward_config_hashes": data.reward_config_hashes,
        "privacy": lineage.privacy.model_dump(exclude={"consent_snapshot_id"}),
        "metrics": {k: round(v, 4) for k, v in lineage.metrics.items()},
        "evaluation": lineage.evaluation.model_dump(),
        "hardware": lineage.hardware,
        "wall_s": lineage.wall_s,
        "created_at": lineage.finished_at.isoformat(),
        "intended_use": "candidate for the release gate; promoted only if it passes",
    }
    if lineage.workload:  # an adapter for one agent: released with --workload
        card["workload"] = lineage.workload
    if lineage.base_model:  # served as a LoRA adapter on this full version
        card["artifact"] = "lora-adapter"
        card["base_model"] = lineage.base_model
    if lineage.student:  # a smaller model of its own, distilled from the teacher
        card["model"] = "flywheel distilled student"
        card["distillation"] = {
            "teacher": lineage.base_version,
            "traffic_windows": examples.windows,
            **lineage.student,
        }
        card["intended_use"] = "cheaper stand-in for its teacher; released if non-inferior"
    return card


def lineage_files(lineage: Lineage) -> dict[str, str]:
    """The text of ``lineage.json`` and ``model_card.yaml``, by file name."""
    record = lineage.model_dump()
    for optional in ("base_model", "workload", "student"):  # unset: the file as it always was
        if record[optional] is None:
            del record[optional]
    as_json = json.dumps(record, indent=2, sort_keys=True, default=str)
    return {LINEAGE: as_json, CARD: yaml.safe_dump(model_card(lineage), sort_keys=False)}


def card_markdown(lineage: Lineage) -> str:
    """The train run's artifact: the model card's essentials as markdown."""
    data, ev, m, privacy = lineage.data, lineage.evaluation, lineage.metrics, lineage.privacy
    nan = float("nan")
    margin, accuracy = m.get("rewards/margins", nan), m.get("rewards/accuracies", nan)
    rows = [
        ("version", f"{lineage.version} (base {lineage.base_version})"),
        *([("LoRA adapter on", lineage.base_model)] if lineage.base_model else []),
        *([("workload", lineage.workload)] if lineage.workload else []),
        ("method", f"{lineage.method} - {lineage.method_reason}"),
        ("pairs / rows trained on", f"{data.pairs} / {data.training_examples.rows}"),
        ("golden rows excluded", data.decontaminated),
        ("golden accuracy", f"{ev.base_accuracy:.3f} -> {ev.accuracy:.3f}"),
        ("final loss", f"{m.get('loss', nan):.4f}"),
        ("reward margin / preference accuracy", f"{margin:.3f} / {accuracy:.3f}"),
        ("training_examples snapshot", data.training_examples.snapshot_ids),
        ("preference_pairs snapshot", data.pairs_snapshot_id),
        ("consent snapshot", privacy.consent_snapshot_id),
        ("PII filter", privacy.pii_filter_version),
        ("hardware / wall", f"{lineage.hardware} / {lineage.wall_s} s"),
    ]
    lines = [f"# train {lineage.version}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def read_lineage(store: ObjectStore, version: str) -> Lineage:
    """The lineage of a trained version.

    Raises:
        ObjectNotFound: the version has no lineage.json.
    """
    return Lineage.model_validate(models.read_model_json(store, version, LINEAGE))


def training_rows(catalog: Catalog, lineage: Lineage) -> pa.Table:
    """The rows a version trained on, read back by Iceberg time travel.

    Raises:
        ValueError: the snapshot no longer exists (expired) or rows are missing from it.
    """
    import pyarrow as pa
    from pyiceberg.expressions import In

    from infra.catalog import get_table

    te = lineage.data.training_examples
    ids = list(te.trace_ids)
    table = get_table(catalog, "training_examples")
    parts = []
    for sid in te.snapshot_ids:
        if table.snapshot_by_id(sid) is None:
            raise ValueError(f"snapshot {sid} of training_examples no longer exists")
        parts.append(table.scan(row_filter=In("trace_id", ids), snapshot_id=sid).to_arrow())
    rows = pa.concat_tables(parts) if parts else table.scan(limit=0).to_arrow()
    found = set(rows.column("trace_id").to_pylist())
    if found != set(ids):
        raise ValueError(f"{len(set(ids) - found)} trained rows are missing from the snapshot")
    return rows
