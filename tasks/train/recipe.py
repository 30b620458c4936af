"""The trainer on its own, for GPUs: the ``train`` flow's data selection, training under
``accelerate launch`` (one or several GPUs, or the CPU), and publication with lineage, in three
steps sharing a run directory (the command: :mod:`deployments.train_recipe`).

:func:`select` reads the rolling buffer at one snapshot through the flow's own selection
(``tasks.train.plan.plan_training``: the same settings, renderer, golden decontamination and
method choice; a workload: its rows only, from its stable version, as ``flywheel train
--workload W``) and writes ``selection.json`` (datetimes as ISO strings, restored on read) and
``run.json``; :func:`train` trains from the base version into ``model/`` (rank 0 saves) and
writes ``outcome.json``; :func:`publish` records the pairs, runs the golden evaluation, and
publishes ``models/<next version>/`` with ``lineage.json`` and the model card, as the flow
would. Settings come from the environment (``FLYWHEEL_*``) as for the flow; ``train``'s
overrides replace ``FLYWHEEL_TRAIN__*`` for this run.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tasks.train.config import TrainConfig

log = logging.getLogger(__name__)

_DT = "__datetime__"


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {_DT: value.isoformat()}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _decode(obj: dict[str, Any]) -> Any:
    return datetime.fromisoformat(obj[_DT]) if set(obj) == {_DT} else obj


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` (datetimes as tagged ISO strings)."""
    path.write_text(json.dumps(data, default=_encode, sort_keys=True))


def read_json(path: Path) -> Any:
    """Read what write_json wrote (datetimes restored)."""
    return json.loads(path.read_text(), object_hook=_decode)


def select(
    run: Path, *, base_version: str | None, method: str | None, workload: str | None = None
) -> dict[str, Any]:
    """Step 1: the flow's selection into ``run/`` (``selection.json``, ``run.json``);
    ``workload``: that workload's rows only (the selection records it for the lineage)."""
    from infra.runtime import Runtime
    from infra.serving.models import model_cache_root
    from tasks.train.checkpoints import fetch_base_task, pick_base_version
    from tasks.train.plan import plan_training

    rt = Runtime.from_env()
    base = base_version or pick_base_version(rt.store, workload)
    base_dir = fetch_base_task.fn(rt.store, base, cache_root=model_cache_root(rt.settings))
    plan = plan_training(
        rt.catalog,
        settings=rt.settings,
        base_version=base,
        base_dir=base_dir,
        method=method,
        workload=workload,
    )
    selection, choice = plan.selection, plan.choice
    run.mkdir(parents=True, exist_ok=True)
    write_json(run / "selection.json", asdict(selection))
    info = {
        "base_version": base,
        "base_dir": str(base_dir),
        "train_run": str(uuid.uuid4()),
        "started_at": datetime.now(UTC),
        "choice": asdict(choice),
    }
    write_json(run / "run.json", info)
    return info


def train(run: Path, overrides: dict[str, Any]) -> dict[str, Any] | None:
    """Step 2 (under ``accelerate launch``): train into ``run/model``; rank 0 writes
    ``outcome.json`` and returns it (other ranks: None)."""
    from infra.settings import get_settings
    from tasks.train.checkpoints import is_demo_model
    from tasks.train.methods import Data
    from tasks.train.trainer import train_model

    info, selection = read_json(run / "run.json"), read_json(run / "selection.json")
    method = overrides.pop("method", None) or info["choice"]["method"]
    if method is None:
        raise SystemExit(f"nothing to train: {info['choice']['reason']}")
    base_dir = Path(info["base_dir"])
    config = TrainConfig.from_settings(
        get_settings().train, method=method, demo_base=is_demo_model(base_dir)
    )
    config = TrainConfig(**{**asdict(config), **overrides})
    outcome = train_model(
        base_dir,
        run / "model",
        config=config,
        data=Data(pairs=selection["pairs"], sft=selection["sft"], prompts=selection["prompts"]),
        base_version=info["base_version"],
    )
    if not (run / "model").is_dir():  # not the main process: it saved nothing
        return None
    record = {
        "config": asdict(config),
        "steps": outcome.steps,
        "metrics": outcome.metrics,
        "wall_s": outcome.wall_s,
        "hardware": outcome.hardware,
    }
    write_json(run / "outcome.json", record)
    return record


def publish(run: Path) -> str:
    """Step 3: pairs, golden evaluation, lineage, ``models/<next version>/``; returns it."""
    from infra.audit import record_event
    from infra.catalog import current_snapshot_id
    from infra.runtime import Runtime
    from tasks.train.checkpoints import evaluate_golden_dirs, publish_checkpoint
    from tasks.train.lineage import build_lineage
    from tasks.train.methods import MethodChoice
    from tasks.train.pairs import Selection, write_pairs
    from tasks.train.plan import TrainRun
    from tasks.train.trainer import TrainOutcome

    rt = Runtime.from_env()
    info, done = read_json(run / "run.json"), read_json(run / "outcome.json")
    selection = Selection(**read_json(run / "selection.json"))
    config = TrainConfig(**done["config"])
    model_dir = run / "model"
    pairs_sid = None
    if config.method == "dpo":
        pairs_sid = write_pairs(rt.catalog, train_run=info["train_run"], pairs=selection.pairs)
    evaluation = evaluate_golden_dirs(
        Path(info["base_dir"]), model_dir, settings=rt.settings, workload=selection.workload
    )
    planned = TrainRun(
        run_id=info["train_run"],
        base=info["base_version"],
        base_dir=Path(info["base_dir"]),
        choice=MethodChoice(**info["choice"]),
        selection=selection,
        started=info["started_at"],
    )
    lineage = build_lineage(
        planned,
        config=config,
        pairs_snapshot_id=pairs_sid,
        consent_snapshot_id=current_snapshot_id(rt.catalog, "consent"),
        outcome=TrainOutcome(
            method=config.method,
            output_dir=model_dir,
            steps=done["steps"],
            metrics=done["metrics"],
            wall_s=done["wall_s"],
            hardware=done["hardware"],
        ),
        evaluation=evaluation,
        settings=rt.settings,
    )
    published = publish_checkpoint(rt.store, model_dir, lineage=lineage)
    record_event(
        rt.catalog,
        event_type="model_trained",
        actor="train-recipe",
        subject=str(published.version),
        details={
            "train_run": info["train_run"],
            "base_version": info["base_version"],
            **({"workload": selection.workload} if selection.workload else {}),
        },
        best_effort=True,
    )
    return str(published.version)
