"""Bootstrap the base model v0 (pre-trained in ``tasks/demo/pretrain.py``) and its model card: a
character-level tokenizer and a small GPT-2 built from a config (nothing downloaded), pre-trained by SFT on non-golden questions of the demo domain so
that its greedy golden accuracy leaves room to improve (about 30-70 %).

Deterministic under the seed, and cached by the hash of its inputs (config, seed, domain
version, golden manifest, code version): a second call with the same inputs finds ``v0`` in the
store (or the trained directory under ``$FLYWHEEL_HOME/cache/bootstrap/<hash>``, or
``$FLYWHEEL_BOOTSTRAP_CACHE_DIR/<hash>``) and returns at
once. The default configuration's build ships in ``tasks/demo/shipped_v0/<hash>``
(:data:`SHIPPED`), so the first call copies it instead of pre-training. With
``FLYWHEEL_BASE_MODEL_PATH`` set, that Hugging Face causal LM is registered as ``v0`` instead of
training one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from infra.errors import ConfigError, ObjectNotFound
from infra.serving import models
from infra.serving.local_lm import LocalLM, intra_op_threads
from tasks import golden
from tasks.demo import clock, domain
from tasks.demo.pretrain import BootstrapConfig, evaluate_golden, fresh_model, progress
from tasks.demo.pretrain_loop import PretrainLog, pretrain
from tasks.demo.workloads import CALCULATOR, CLOCK, golden_dir, golden_items, of_settings

if TYPE_CHECKING:
    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

CODE_VERSION = "bootstrap/v3"  # bump when the training recipe changes: invalidates caches
# v0 of the default configuration (both demo workloads, seed 0), built once with this code and
# kept in the repository (3.2 MB: ``make v0`` rebuilds it): ``make run`` and the tests start
# from it instead of pre-training for minutes; any other configuration is built as before
SHIPPED = Path(__file__).with_name("shipped_v0")


@dataclass
class BootstrapResult:
    """The base model v0: where it is, its golden accuracy, and whether it came from the cache."""

    version: str
    model_dir: Path
    golden_accuracy: float  # on the calculator's golden set
    cached: bool
    input_hash: str
    wall_s: float
    n_params: int
    source: str  # "trained" or "base_model_path"
    accuracy_by_workload: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        """A short human summary (what ``flywheel bootstrap`` prints)."""
        how = "already registered (cache)" if self.cached else f"built in {self.wall_s:.0f} s"
        return (
            f"{self.version} ({self.source}, {self.n_params:,} parameters) {how}: "
            f"golden accuracy {self.golden_accuracy:.1%} (greedy); local copy {self.model_dir}"
        )


def input_hash(config: BootstrapConfig, seed: int, base_model_path: str | None = None) -> str:
    """The cache key: everything that changes the bootstrapped model."""
    manifest = golden.verify_manifest()
    payload: dict[str, Any] = {
        "config": _hashed_config(config),
        "seed": seed,
        "domain": domain.DOMAIN_VERSION,
        "golden": manifest,
        "code": CODE_VERSION,
        "base_model_path": base_model_path,
    }
    if CLOCK in config.workloads:  # keys of a calculator-only v0 stay as they were
        payload["clock"] = [clock.DOMAIN_VERSION, golden.verify_manifest(golden_dir(CLOCK))]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def _hashed_config(config: BootstrapConfig) -> dict[str, Any]:
    """The config as hashed: without ``hedge_share`` when off, so default caches stay valid."""
    out = asdict(config)
    if not out.get("hedge_share"):
        out.pop("hedge_share", None)
    if tuple(out.get("workloads") or ()) == (CALCULATOR,):
        out.pop("workloads", None)
    return out


def bootstrap_base_model(
    store: ObjectStore,
    *,
    settings: Settings,
    seed: int = 0,
    force: bool = False,
    config: BootstrapConfig | None = None,
) -> BootstrapResult:
    """Build, pre-train, evaluate and register the base model as ``v0`` (cached).

    Raises:
        ConfigError: ``base_model_path`` is set but is not a loadable model directory.
    """
    started = time.perf_counter()
    if config is None:
        config = BootstrapConfig.for_profile(settings.profile, of_settings(settings))
        if settings.bootstrap_hedge_share:
            config = replace(config, hedge_share=settings.bootstrap_hedge_share)
    key = input_hash(config, seed, settings.base_model_path)
    cache_root = models.model_cache_root(settings)
    if not force and models.version_exists(store, "v0"):
        try:
            lineage = models.read_model_json(store, "v0", "lineage.json")
        except ObjectNotFound:
            lineage = {}
        if lineage.get("input_hash") == key:
            log.info("bootstrap cache hit (%s): v0 already registered", key)
        else:  # v0 is the root of every later version: never replaced behind their back
            log.warning("v0 exists with other bootstrap inputs; keeping it (force rebuilds)")
        progress("v0 is already built (cached)", config, done=config.steps)
        path = models.fetch_model(store, "v0", cache_root)
        return _result(lineage, model_dir=path, cached=True, started=started)
    work = build_cache_root(settings) / key
    result_file = work / "result.json"
    with _one_builder(work, config):
        if force or not (result_file.is_file() or _copy_shipped(key, work)):
            _build(work, config=config, seed=seed, settings=settings, key=key)
        progress("register v0 in the store", config, done=config.steps)
        info = json.loads(result_file.read_text())
        models.publish_model_dir(store, "v0", work / "model", overwrite=True)
    path = models.fetch_model(store, "v0", cache_root)
    return _result(info, model_dir=path, cached=False, started=started)


def _copy_shipped(key: str, work: Path) -> bool:
    """Copy the shipped build of ``key`` (:data:`SHIPPED`) into the build cache entry ``work``;
    False when none is shipped for these inputs. Its input hash covers what a build depends
    on (config, seed, domain, golden sets, :data:`CODE_VERSION`), so it is the build this code
    would make: bit for bit on the same CPU, one thread (``make v0`` checks that)."""
    src = SHIPPED / key
    if not (src / "result.json").is_file():
        return False
    partial = _partial(work)
    shutil.copytree(src, partial)
    _complete(partial, work)
    log.info("bootstrap: v0 %s from the build shipped in %s", key, SHIPPED)
    return True


def _partial(work: Path) -> Path:
    """An empty path beside the cache entry ``work`` to build it in: built there and renamed
    when complete (:func:`_complete`), a build cache that several processes share never shows
    another one a half-written model."""
    partial = work.with_name(f"{work.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    return partial


def _complete(partial: Path, work: Path) -> None:
    """Put the finished build ``partial`` in place as the cache entry ``work``."""
    shutil.rmtree(work, ignore_errors=True)
    partial.rename(work)


@contextmanager
def _one_builder(work: Path, config: BootstrapConfig) -> Iterator[None]:
    """Hold the build cache entry ``work`` alone (an advisory lock beside it): a second process
    bootstrapping the same inputs into a shared cache (another home, another test worker)
    waits for the first one's build and registers it instead of pre-training it again, and
    never has the build it is copying replaced under it."""
    import fcntl

    work.parent.mkdir(parents=True, exist_ok=True)
    with work.with_name(f"{work.name}.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress("wait for another process building this v0", config, done=0)
            log.info("another process is building v0 %s: waiting for it", work.name)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_cache_root(settings: Settings) -> Path:
    """Where trained builds of v0 are kept by input hash: ``FLYWHEEL_BOOTSTRAP_CACHE_DIR`` when
    set (one cache that several homes share, e.g. every test of a session), else
    ``$FLYWHEEL_HOME/cache/bootstrap``."""
    if settings.bootstrap_cache_dir is not None:
        return settings.bootstrap_cache_dir.expanduser().resolve()
    return settings.home_dir / "cache" / "bootstrap"


def _result(
    info: dict[str, Any], *, model_dir: Path, cached: bool, started: float
) -> BootstrapResult:
    """The result from v0's lineage (``lineage.json``, or ``result.json`` of a fresh build)."""
    return BootstrapResult(
        version="v0",
        model_dir=model_dir,
        golden_accuracy=float(info.get("golden_accuracy", float("nan"))),
        cached=cached,
        input_hash=str(info.get("input_hash", "")),
        wall_s=time.perf_counter() - started,
        n_params=int(info.get("n_params", 0)),
        source=str(info.get("source", "unknown")),
        accuracy_by_workload={
            str(k): float(v) for k, v in (info.get("golden_accuracy_by_workload") or {}).items()
        },
    )


def _build(work: Path, *, config: BootstrapConfig, seed: int, settings: Settings, key: str) -> None:
    """Train (or copy ``base_model_path``) into ``work/model`` with card and lineage."""
    import torch

    t0 = time.perf_counter()
    partial = _partial(work)
    out = partial / "model"
    out.mkdir(parents=True)
    items = domain.load_golden()
    trained: PretrainLog | None = None
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with intra_op_threads(max(1, config.threads)):  # 1: see LocalLM.load
        progress("build the tokenizer and the model", config, done=0)
        if settings.base_model_path:
            src = Path(settings.base_model_path).expanduser()
            if not (src / "config.json").is_file():
                raise ConfigError(f"FLYWHEEL_BASE_MODEL_PATH={src} is not a Hugging Face model")
            shutil.copytree(src, out, dirs_exist_ok=True)
            source = "base_model_path"
        else:
            torch.manual_seed(seed)
            tokenizer, model = fresh_model(config, seed)
            trained = pretrain(model, tokenizer, config, seed)
            model.save_pretrained(out, safe_serialization=True)
            tokenizer.save_pretrained(out)
            source = "trained"
        progress("evaluate v0 on the golden set", config, done=config.steps)
        lm = LocalLM.load(out, device=settings.device)
        accuracy, _ = evaluate_golden(
            lm,
            items,
            batch_size=config.eval_batch_size,
            max_new_tokens=settings.eval_max_new_tokens,
        )
        by_workload = {CALCULATOR: accuracy}
        for w in [w for w in config.workloads if w != CALCULATOR]:
            by_workload[w], _ = evaluate_golden(
                lm,
                golden_items(w),
                batch_size=config.eval_batch_size,
                max_new_tokens=settings.eval_max_new_tokens,
            )
    wall = time.perf_counter() - t0
    info = {
        "version": "v0",
        "base": None,
        "source": source,
        "method": "bootstrap-sft" if source == "trained" else "registered",
        "input_hash": key,
        "seed": seed,
        "config": asdict(config),
        "domain_version": domain.DOMAIN_VERSION,
        "golden_manifest": golden.verify_manifest(),
        "golden_accuracy": accuracy,
        **({"golden_accuracy_by_workload": by_workload} if len(by_workload) > 1 else {}),
        "golden_items": len(items),
        "n_params": lm.num_parameters,
        "final_loss": trained.losses[-1] if trained else None,
        "steps": len(trained.losses) if trained else 0,
        "dev_curve": trained.curve if trained else [],
        "training_data": "synthetic non-golden questions of the demo workloads "
        f"{', '.join(config.workloads)} (golden questions excluded)",
        "wall_s": round(wall, 1),
        "hardware": f"{platform.machine()} CPU, {config.threads} thread(s)",
        "created_at": datetime.now(UTC).isoformat(),
    }
    (out / "lineage.json").write_text(json.dumps(info, indent=2, sort_keys=True))
    (out / "model_card.yaml").write_text(yaml.safe_dump(base_model_card(info), sort_keys=False))
    (partial / "result.json").write_text(json.dumps(info, sort_keys=True))
    _complete(partial, work)
    log.info("bootstrapped v0 (%s): golden accuracy %.3f in %.0f s", source, accuracy, wall)


def base_model_card(info: dict[str, Any]) -> dict[str, Any]:
    """The model card of v0 from its lineage record (``lineage.json``)."""
    return {
        "model": "flywheel embedded base model",
        "version": info["version"],
        "what": (
            "character-level GPT-2 built from a config and pre-trained here by SFT on the "
            "demo calculator domain (2-digit additions); a deliberately weak start for the loop"
            if info["source"] == "trained"
            else "a local Hugging Face causal LM registered as the base model"
        ),
        "architecture": info["config"] if info["source"] == "trained" else "see config.json",
        "parameters": info["n_params"],
        "training": {
            "method": info["method"],
            "data": info["training_data"] if info["source"] == "trained" else None,
            "seed": info["seed"],
            "steps": info["steps"],
            "stopped_at_dev_accuracy": info["dev_curve"][-1][1] if info["dev_curve"] else None,
            "final_loss": info["final_loss"],
        },
        "evaluation": {
            "golden_accuracy": round(info["golden_accuracy"], 4),
            "golden_items": info["golden_items"],
            "decoding": "greedy",
            "golden_manifest": info["golden_manifest"],
        },
        "input_hash": info["input_hash"],
        "lineage": {"base": None, "user_data": "none (synthetic only)"},
        "intended_use": "demo and tests of the flywheel loop; not a general-purpose model",
        "hardware": info["hardware"],
        "wall_s": info["wall_s"],
        "created_at": info["created_at"],
    }
