"""Stage 4 checkpoints: the base model a run starts from, the scratch directory it trains
into, the golden evaluation of the result, and its publication as the next model version
(atomic, with ``lineage.json`` and ``model_card.yaml``)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.serving import models
from infra.serving.causal_lm import root_dir
from infra.task_retries import IO_RETRIES
from tasks.train.lineage import Evaluation, Lineage, lineage_files

if TYPE_CHECKING:
    from infra.settings import Settings
    from infra.store import ObjectStore


def pick_base_version(store: ObjectStore, workload: str | None = None) -> str:
    """The stable version of the routing state when it exists, else the newest version. With
    ``workload``: that workload's stable version, i.e. its own once it promoted one (its
    adapter is continued), else the shared stable version.

    Raises:
        ObjectNotFound: no model version exists (run ``flywheel bootstrap`` first).
    """
    from infra.errors import ObjectNotFound
    from infra.routing import load_state

    stable = load_state(store).release_of(workload).stable
    if stable and models.version_exists(store, stable):
        return stable
    versions = models.list_versions(store)
    if not versions:
        raise ObjectNotFound("no model version in the store; run `flywheel bootstrap` first")
    return versions[-1]


@task(**IO_RETRIES)
def fetch_base_task(store: ObjectStore, version: str, *, cache_root: Path) -> Path:
    """Returns the local directory of the base model version."""
    return models.fetch_model(store, version, cache_root)


@contextmanager
def scratch_dir(root: Path) -> Iterator[Path]:
    """A temporary directory under ``root`` (the checkpoint before it is published)."""
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="train-", dir=root) as tmp:
        yield Path(tmp)


def is_demo_model(base_dir: Path) -> bool:
    """Whether ``base_dir`` is (an adapter on) the embedded demo model: the GPT-2 that
    ``flywheel bootstrap`` trains itself, or a whole checkpoint flywheel trained from it (a
    promoted demo candidate is the next cycle's base: it trains whole too, as its parent did).
    Every other base model trains LoRA adapters unless ``FLYWHEEL_TRAIN__USE_LORA`` says
    otherwise."""
    root = root_dir(base_dir)
    try:
        lineage = json.loads((root / "lineage.json").read_text())
        model_type = json.loads((root / "config.json").read_text()).get("model_type")
    except (OSError, ValueError):
        return False
    if model_type != "gpt2":
        return False
    if lineage.get("source") == "trained":  # bootstrap's own
        return True
    trained_whole = (lineage.get("hyperparameters") or {}).get("use_lora") is False
    return bool(lineage.get("base_version") and trained_whole)


def evaluate_golden_dirs(
    base_dir: Path, new_dir: Path, *, settings: Settings, workload: str | None = None
) -> Evaluation:
    """Greedy golden accuracy of the base and the new model on the golden set the settings name
    for ``workload`` (the same items, the same decoding, each item's verifier). A new LoRA
    adapter loads on the full version under ``base_dir``."""
    from infra.serving.local_lm import LocalLM
    from tasks.golden import golden_accuracy, settings_golden

    golden = settings_golden(settings.reward, workload, workloads=settings.workloads)
    tokens = settings.eval_max_new_tokens
    base_lm = LocalLM.load(base_dir, device=settings.device)
    base, _ = golden_accuracy(base_lm, golden, reward=settings.reward, max_new_tokens=tokens)
    new_lm = LocalLM.load(new_dir, device=settings.device, base_dir=root_dir(base_dir))
    new, _ = golden_accuracy(new_lm, golden, reward=settings.reward, max_new_tokens=tokens)
    return Evaluation(golden_items=len(golden), base_accuracy=base, accuracy=new, decoding="greedy")


@task(cache_policy=NO_CACHE)
def evaluate_task(
    base_dir: Path, new_dir: Path, *, settings: Settings, workload: str | None = None
) -> Evaluation:
    """Returns the golden accuracy of the base and the trained model (on ``workload``'s set)."""
    return evaluate_golden_dirs(base_dir, new_dir, settings=settings, workload=workload)


def published_runs(store: ObjectStore) -> list[str]:
    """The train runs behind the published versions (from their lineage; bootstrapped
    versions have none)."""
    from infra.errors import ObjectNotFound
    from tasks.train.lineage import LINEAGE

    runs = set()
    for version in models.list_versions(store):
        try:  # a bootstrapped base (v0) has a lineage of its own shape, without a train run
            run = models.read_model_json(store, version, LINEAGE).get("train_run")
        except ObjectNotFound:
            continue
        if isinstance(run, str) and run:
            runs.add(run)
    return sorted(runs)


def publish_checkpoint(store: ObjectStore, model_dir: Path, *, lineage: Lineage) -> Lineage:
    """Write lineage.json and model_card.yaml into ``model_dir`` and publish it as the next
    version (atomic: visible only once complete). Returns the lineage with its version."""
    version = models.next_version(store)
    published = lineage.model_copy(update={"version": version})
    for name, text in lineage_files(published).items():
        (model_dir / name).write_text(text)
    models.publish_model_dir(store, version, model_dir)
    return published


@task(**IO_RETRIES)
def publish_task(store: ObjectStore, model_dir: Path, *, lineage: Lineage) -> Lineage:
    """Returns the published version's lineage (``version`` set to the name it got)."""
    return publish_checkpoint(store, model_dir, lineage=lineage)
