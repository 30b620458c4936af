"""Bootstrap the base model v0: a character-level tokenizer and a small GPT-2 built from a
config (nothing downloaded), pre-trained by SFT on non-golden questions of the demo domain so
that its greedy golden accuracy leaves room to improve (about 30-70 %).

Deterministic under the seed, and cached by the hash of its inputs (config, seed, domain
version, golden manifest, code version): a second call with the same inputs finds ``v0`` in the
store (or the trained directory under ``$FLYWHEEL_HOME/cache/bootstrap/<hash>``) and returns at
once. With ``FLYWHEEL_BASE_MODEL_PATH`` set, that Hugging Face causal LM is registered as ``v0``
instead of training one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import random
import shutil
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from infra import models
from infra.errors import ConfigError, ObjectNotFound
from infra.local_lm import LocalLM, intra_op_threads
from infra.progress import report_progress
from tasks import domain
from tasks.bootstrap_card import base_model_card
from tasks.llama_profile import agent_messages
from tasks.pretrain_step import train_step

if TYPE_CHECKING:
    from infra.settings import Settings
    from infra.store import ObjectStore

log = logging.getLogger(__name__)

PROGRESS_EVERY = 5  # pre-training steps between progress reports
CODE_VERSION = "bootstrap/v1"  # bump when the training recipe changes: invalidates caches
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[EOS]"]


@dataclass(frozen=True)
class BootstrapConfig:
    """Architecture and pre-training budget of the embedded base model."""

    profile: str = "demo"  # "demo": a character GPT-2; "llama": see tasks/llama_profile.py
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    n_positions: int = 128
    steps: int = 900  # the most optimiser steps (and the cosine schedule's horizon)
    batch_size: int = 64
    learning_rate: float = 2e-3
    warmup_steps: int = 40
    weight_decay: float = 0.01
    threads: int = 1
    eval_batch_size: int = 100
    # Accuracy on this task jumps within a few dozen steps at a point that varies with the
    # seed and the CPU's arithmetic, so a fixed step count lands anywhere from 10 % to 80 %.
    # Instead pre-training stops once greedy accuracy on non-golden dev items reaches the
    # target: a deliberately weak base with room for the loop to improve.
    target_accuracy: float = 0.5
    min_steps: int = 200
    eval_every: int = 25
    dev_items: int = 200
    # Real chat models sometimes hedge ("81 or 82"): this share of pre-training answers is
    # such a hedge (the right number and a neighbour, in random order). 0 (the default) adds
    # none; the exploitable-judge demo sets it (FLYWHEEL_BOOTSTRAP_HEDGE_SHARE) so that a
    # judge fooled by hedges has something to reward (tests/e2e/test_exploitable_judge.py).
    hedge_share: float = 0.0

    @classmethod
    def for_profile(cls, profile: str) -> BootstrapConfig:
        """The defaults of an embedded profile (``FLYWHEEL_PROFILE``)."""
        if profile == "llama":
            from tasks.llama_profile import BOOTSTRAP

            return cls(profile="llama", **BOOTSTRAP)
        return cls()


@dataclass
class BootstrapResult:
    version: str
    model_dir: Path
    golden_accuracy: float
    cached: bool
    input_hash: str
    wall_s: float
    n_params: int
    source: str  # "trained" or "base_model_path"

    def describe(self) -> str:
        """A short human summary (what ``flywheel bootstrap`` prints)."""
        how = "already registered (cache)" if self.cached else f"built in {self.wall_s:.0f} s"
        return (
            f"{self.version} ({self.source}, {self.n_params:,} parameters) {how}: "
            f"golden accuracy {self.golden_accuracy:.1%} (greedy); local copy {self.model_dir}"
        )


def build_tokenizer(max_length: int) -> Any:
    """A character-level ``PreTrainedTokenizerFast`` (printable ASCII + newline)."""
    from tokenizers import Tokenizer, decoders
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    chars = [chr(c) for c in range(32, 127)] + ["\n"]
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS + chars)}
    # BPE without merges over a whole-string "word" is exactly one token per character
    core = Tokenizer(BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    core.decoder = decoders.Fuse()
    core.add_special_tokens(SPECIAL_TOKENS)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="[PAD]",
        unk_token="[UNK]",
        eos_token="[EOS]",
        bos_token="[EOS]",
        model_max_length=max_length,
        padding_side="left",
    )


def _fresh_model(config: BootstrapConfig, seed: int) -> tuple[Any, Any]:
    """(tokenizer, untrained model) of the configured profile."""
    if config.profile == "llama":
        from tasks import llama_profile

        return llama_profile.fresh(config, seed=seed)
    if config.profile != "demo":
        raise ConfigError(f"unknown profile {config.profile!r} (FLYWHEEL_PROFILE: demo or llama)")
    tok = build_tokenizer(config.n_positions)
    return tok, build_model(config, tok)


def build_model(config: BootstrapConfig, tokenizer: Any) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=config.n_positions,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        resid_pdrop=0.0,  # fresh samples every step: nothing to regularise against
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = GPT2LMHeadModel(cfg)
    model.loss_type = "ForCausalLM"  # transformers cannot infer it from "GPT2LMHeadModel"
    return model


@dataclass
class PretrainLog:
    losses: list[float]
    curve: list[tuple[int, float]]  # (step, dev accuracy)
    stopped_early: bool


def pretrain(model: Any, tokenizer: Any, config: BootstrapConfig, seed: int) -> PretrainLog:
    """SFT on random non-golden items until the dev accuracy reaches the target."""
    import math

    import torch

    rng = random.Random(seed)
    dev_rng = random.Random(seed + 1_000_003)
    dev = [domain.sample_question(dev_rng) for _ in range(config.dev_items)]
    probe = LocalLM(model, tokenizer, path=Path("."), max_context=config.n_positions)
    opt = torch.optim.AdamW(
        model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
    )

    def lr_at(step: int) -> float:  # linear warm-up, cosine decay to 10 %
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        done = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
        return 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, done)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    log_ = PretrainLog(losses=[], curve=[], stopped_early=False)
    doing = f"pre-train on the demo domain (until dev accuracy {config.target_accuracy:.0%})"
    for step in range(1, config.steps + 1):
        if step % PROGRESS_EVERY == 1:
            _progress(doing, config, done=step - 1)
        model.train()
        log_.losses.append(
            train_step(
                model, tokenizer, opt, rng, config.batch_size, hedge_share=config.hedge_share
            )
        )
        sched.step()
        if step >= config.min_steps and step % config.eval_every == 0:
            model.eval()
            accuracy, _ = evaluate_golden(probe, dev, batch_size=config.eval_batch_size)
            log_.curve.append((step, accuracy))
            log.info("pre-training step %d: dev accuracy %.3f", step, accuracy)
            if accuracy >= config.target_accuracy:
                log_.stopped_early = step < config.steps
                break
    model.eval()
    return log_


def evaluate_golden(
    lm: LocalLM, items: list[domain.DomainItem], *, batch_size: int = 100, max_new_tokens: int = 8
) -> tuple[float, list[float]]:
    """Greedy accuracy of ``lm`` on ``items`` and the verifier score of each item (batched),
    asked as the agent and the gate ask: question, calculator call and result (the demo
    prompt keeps only the question)."""
    scores: list[float] = []
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        prompts = [lm.render(agent_messages(it, with_tool=True)) for it in chunk]
        gens = lm.generate_batch(prompts, temperature=0.0, max_new_tokens=max_new_tokens)
        scores.extend(domain.verify(it, g.text) for it, g in zip(chunk, gens, strict=True))
    return (sum(scores) / len(scores) if scores else 0.0), scores


def input_hash(config: BootstrapConfig, seed: int, base_model_path: str | None = None) -> str:
    """The cache key: everything that changes the bootstrapped model."""
    manifest = domain.verify_manifest()
    payload = {
        "config": _hashed_config(config),
        "seed": seed,
        "domain": domain.DOMAIN_VERSION,
        "golden": manifest,
        "code": CODE_VERSION,
        "base_model_path": base_model_path,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def _hashed_config(config: BootstrapConfig) -> dict[str, Any]:
    """The config as hashed: without ``hedge_share`` when off, so default caches stay valid."""
    out = asdict(config)
    if not out.get("hedge_share"):
        out.pop("hedge_share", None)
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
        config = BootstrapConfig.for_profile(settings.profile)
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
        _progress("v0 is already built (cached)", config, done=config.steps)
        path = models.fetch_model(store, "v0", cache_root)
        return _result(lineage, model_dir=path, cached=True, started=started)
    work = settings.home_dir / "cache" / "bootstrap" / key
    result_file = work / "result.json"
    if force or not result_file.is_file():
        _build(work, config=config, seed=seed, settings=settings, key=key)
    _progress("register v0 in the store", config, done=config.steps)
    info = json.loads(result_file.read_text())
    models.publish_model_dir(store, "v0", work / "model", overwrite=True)
    path = models.fetch_model(store, "v0", cache_root)
    return _result(info, model_dir=path, cached=False, started=started)


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
    )


def _progress(step: str, config: BootstrapConfig, *, done: int) -> None:
    """Bootstrap's progress: the bar counts pre-training steps (the bulk of the time)."""
    report_progress("bootstrap", step, done=done, total=config.steps)


def _build(work: Path, *, config: BootstrapConfig, seed: int, settings: Settings, key: str) -> None:
    """Train (or copy ``base_model_path``) into ``work/model`` with card and lineage."""
    import torch

    t0 = time.perf_counter()
    if work.exists():
        shutil.rmtree(work)
    out = work / "model"
    out.mkdir(parents=True)
    golden = domain.load_golden()
    trained: PretrainLog | None = None
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with intra_op_threads(max(1, config.threads)):  # 1: see LocalLM.load
        _progress("build the tokenizer and the model", config, done=0)
        if settings.base_model_path:
            src = Path(settings.base_model_path).expanduser()
            if not (src / "config.json").is_file():
                raise ConfigError(f"FLYWHEEL_BASE_MODEL_PATH={src} is not a Hugging Face model")
            shutil.copytree(src, out, dirs_exist_ok=True)
            source = "base_model_path"
        else:
            torch.manual_seed(seed)
            tokenizer, model = _fresh_model(config, seed)
            trained = pretrain(model, tokenizer, config, seed)
            model.save_pretrained(out, safe_serialization=True)
            tokenizer.save_pretrained(out)
            source = "trained"
        _progress("evaluate v0 on the golden set", config, done=config.steps)
        lm = LocalLM.load(out, device=settings.device)
        accuracy, _ = evaluate_golden(
            lm,
            golden,
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
        "golden_manifest": domain.verify_manifest(),
        "golden_accuracy": accuracy,
        "golden_items": len(golden),
        "n_params": lm.num_parameters,
        "final_loss": trained.losses[-1] if trained else None,
        "steps": len(trained.losses) if trained else 0,
        "dev_curve": trained.curve if trained else [],
        "training_data": "synthetic non-golden 2-digit additions (golden pairs excluded)",
        "wall_s": round(wall, 1),
        "hardware": f"{platform.machine()} CPU, {config.threads} thread(s)",
        "created_at": datetime.now(UTC).isoformat(),
    }
    (out / "lineage.json").write_text(json.dumps(info, indent=2, sort_keys=True))
    (out / "model_card.yaml").write_text(yaml.safe_dump(base_model_card(info), sort_keys=False))
    (work / "result.json").write_text(json.dumps(info, sort_keys=True))
    log.info("bootstrapped v0 (%s): golden accuracy %.3f in %.0f s", source, accuracy, wall)
