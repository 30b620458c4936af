"""Stage 4 training: TRL DPO (with an SFT term), RFT (SFT on high-reward answers) or GRPO.

Which method a run uses, and how TRL builds its trainer: :mod:`tasks.train.methods`.

LoRA (``FLYWHEEL_TRAIN__USE_LORA``; unset: on for every base model but the demo model): peft
adapters on ``c_attn`` for GPT-2 (every linear layer but the head otherwise).
``lora_output="adapter"`` (the default) saves the adapter alone with ``base_model.json`` naming the full version it applies to
(a base that is itself an adapter version: that adapter trains on, on the same full version);
``"merged"`` folds it into the weights and saves a plain model directory. Full checkpoints are
saved in safetensors shards of ``max_shard_size`` (uploaded as multipart objects).

The same code runs on a laptop CPU, one GPU (bf16 when supported) or several GPUs; the recipe
that runs it on its own under ``accelerate launch`` with the flow's data selection and
publishes the result with lineage: :mod:`tasks.train.recipe`.
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.serving.causal_lm import (
    Placement,
    adapter_base,
    is_adapter,
    load_causal_lm,
    write_adapter_base,
)
from tasks.train.config import TrainConfig
from tasks.train.methods import BUILDERS, Data, Method

if TYPE_CHECKING:
    from infra.settings import RewardSettings, Settings

log = logging.getLogger(__name__)

Progress = Callable[[int, int, dict[str, float]], None]
METRIC_KEYS = (
    "rewards/margins",
    "rewards/accuracies",
    "rewards/chosen",
    "rewards/rejected",
    "mean_token_accuracy",
    "reward",
    "reward_std",
    "entropy",
)


@dataclass(kw_only=True)
class TrainOutcome:
    """What a training run produced: the model directory, its metrics and the trainer log."""

    method: Method
    output_dir: Path
    steps: int
    metrics: dict[str, float]
    log_history: list[dict[str, float]] = field(default_factory=list)  # the trainer's state
    wall_s: float = 0.0
    hardware: str = ""


def summarize(log_history: list[dict[str, float]], steps: int) -> dict[str, float]:
    """Final loss, first loss, runtime and the last logged value of each method metric."""
    logs = [h for h in log_history if "loss" in h]
    final: dict[str, float] = next((h for h in reversed(log_history) if "train_runtime" in h), {})
    out: dict[str, float] = {"steps": float(steps)}
    if logs:
        out["first_loss"] = float(logs[0]["loss"])
        out["loss"] = float(logs[-1]["loss"])
    for key in ("train_loss", "train_runtime"):
        if key in final:
            out[key] = float(final[key])
    if "train_runtime" in final and steps:
        out["seconds_per_step"] = float(final["train_runtime"]) / steps
    for key in METRIC_KEYS:
        values = [float(h[key]) for h in logs if key in h and math.isfinite(float(h[key]))]
        if values:
            out[key] = values[-1]
    return out


def hardware() -> str:
    """The device the trainer runs on, in words."""
    import platform

    import torch

    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return f"{torch.cuda.device_count()}x {name} (CUDA {torch.version.cuda})"
    return f"{platform.machine()} CPU, {torch.get_num_threads()} threads"


def progress_callback(report: Progress) -> Any:
    """A ``TrainerCallback`` that calls ``report(step, max_steps, logs)`` at every log line."""
    from transformers import TrainerCallback

    class _Progress(TrainerCallback):  # type: ignore[misc]
        def on_log(
            self,
            args: Any,  # noqa: ARG002
            state: Any,
            control: Any,  # noqa: ARG002
            logs: Any = None,
            **kw: Any,  # noqa: ARG002 - transformers' callback signature
        ) -> None:
            if state.is_world_process_zero:
                report(int(state.global_step), int(state.max_steps), dict(logs or {}))

    return _Progress()


def _common_args(config: TrainConfig, work: Path) -> dict[str, Any]:
    import torch
    from transformers import TrainingArguments

    # transformers 5 renamed gradient_checkpointing (the old name warns); 4.x knows only it
    names = TrainingArguments.__dataclass_fields__
    checkpointing = (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else "gradient_checkpointing"
    )

    bf16 = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    return {
        "output_dir": str(work),
        "learning_rate": config.learning_rate,
        "max_steps": config.max_steps,
        "per_device_train_batch_size": config.batch_size,
        "seed": config.seed,
        "logging_steps": config.logging_steps,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "bf16": bf16,
        checkpointing: config.gradient_checkpointing,
        "dataloader_num_workers": 0,
        "dataloader_pin_memory": torch.cuda.is_available(),
    }


def _lora(config: TrainConfig, model: Any) -> Any:
    if not config.use_lora or hasattr(model, "peft_config"):  # none, or an adapter trains on
        return None
    from peft import LoraConfig

    if hasattr(model, "peft_config"):  # continuing a published adapter: it is trained as is
        return None
    gpt2 = model.config.model_type == "gpt2"  # Conv1D layers: weights stored transposed
    targets: Any = config.lora_target_modules or (["c_attn"] if gpt2 else _linear_names(model))
    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=0.0,
        target_modules=targets,
        fan_in_fan_out=gpt2,
        task_type="CAUSAL_LM",
    )


def _linear_names(model: Any) -> list[str]:
    """Every linear layer's short name but the output head (``q_proj``, ..., ``down_proj`` on a
    Llama): peft's ``all-linear``, spelled the way vLLM matches adapter modules."""
    import torch

    names = {
        name.rsplit(".", 1)[-1]
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
    }
    return sorted(names - {"lm_head"})


def _load(base_dir: Path, config: TrainConfig) -> tuple[Any, Any]:
    """Tokenizer and model; an adapter base loads on its full version (trainable when LoRA
    goes on, merged otherwise). fp32 weights: the trainer moves them to the GPU and runs bf16
    autocast there (``_common_args``)."""
    import datasets
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    datasets.disable_progress_bars()  # a flow log, not a terminal
    hf_logging.disable_progress_bar()

    tok = AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = load_causal_lm(
        base_dir, where=Placement("cpu", "float32"), trainable_adapter=config.use_lora
    )
    return model, tok


def root_version(base_dir: Path, base_version: str | None) -> str:
    """The full version an adapter trained from ``base_dir`` applies to."""
    if is_adapter(base_dir):
        return adapter_base(base_dir)
    return base_version or base_dir.name  # fetched versions live in cache/models/<version>


def _save(trainer: Any, tok: Any, out: Path, *, config: TrainConfig, root: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    final = trainer.accelerator.unwrap_model(trainer.model)
    if config.use_lora and config.lora_output == "adapter":
        final.save_pretrained(str(out), safe_serialization=True)  # adapter weights only
        (out / "README.md").unlink(missing_ok=True)  # peft's blank card; ours: model_card.yaml
        write_adapter_base(out, root)
    else:
        if config.use_lora:
            final = final.merge_and_unload()
        final.save_pretrained(
            str(out), safe_serialization=True, max_shard_size=config.max_shard_size
        )
    tok.save_pretrained(str(out))


def train_model(
    base_dir: str | Path,
    output_dir: str | Path,
    *,
    config: TrainConfig,
    data: Data,
    callbacks: Sequence[Any] = (),
    reward: RewardSettings | Settings | None = None,  # Settings: its judge and verifiers
    base_version: str | None = None,
) -> TrainOutcome:
    """Train ``config.method`` from ``base_dir`` on ``data`` (``pairs`` for dpo, ``sft`` for
    rft, ``prompts`` for grpo) and save the model (or the LoRA adapter) and tokenizer into
    ``output_dir``. ``base_version``: the store version ``base_dir`` holds (default: its name),
    named by an adapter as its base."""
    import torch
    from transformers import PrinterCallback

    started = time.perf_counter()
    model, tok = _load(Path(base_dir), config)
    out = Path(output_dir)
    threads = torch.get_num_threads()
    if config.threads:  # two busy threads on two shared cores can be 10x slower than one
        torch.set_num_threads(config.threads)
    with _restore_threads(threads), tempfile.TemporaryDirectory(prefix="flywheel-trainer-") as work:
        extra = {"reward": reward} if config.method == "grpo" else {}
        trainer = BUILDERS[config.method](
            config,
            data=data,
            common=_common_args(config, Path(work)),
            model=model,
            processing_class=tok,
            callbacks=list(callbacks),
            peft_config=_lora(config, model),
            **extra,
        )
        trainer.remove_callback(PrinterCallback)  # metrics go to the log history, not stdout
        trainer.train()
        device = hardware()
        if trainer.is_world_process_zero():
            _save(trainer, tok, out, config=config, root=root_version(Path(base_dir), base_version))
    steps = int(trainer.state.global_step)
    history = list(trainer.state.log_history)
    wall = time.perf_counter() - started
    log.info("trained %s for %d steps in %.1f s", config.method, steps, wall)
    return TrainOutcome(
        method=config.method,
        output_dir=out,
        steps=steps,
        metrics=summarize(history, steps),
        log_history=history,
        wall_s=wall,
        hardware=device,
    )


@contextmanager
def _restore_threads(threads: int) -> Iterator[None]:
    import torch

    try:
        yield
    finally:
        torch.set_num_threads(threads)


@task(cache_policy=NO_CACHE)
def train_task(
    base_dir: Path,
    output_dir: Path,
    *,
    config: TrainConfig,
    data: Data,
    callbacks: Sequence[Any] = (),
    reward: RewardSettings | Settings | None = None,  # Settings: its judge and verifiers
    base_version: str | None = None,
) -> TrainOutcome:
    """Returns the trained checkpoint (not retried: a failed run is a bug, not a blip)."""
    return train_model(
        base_dir,
        output_dir,
        config=config,
        data=data,
        callbacks=callbacks,
        reward=reward,
        base_version=base_version,
    )
