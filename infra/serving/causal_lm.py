"""Loading Hugging Face causal LMs for training, serving and evaluation: the device and dtype
for the hardware, full model directories and LoRA adapter versions on their base.

Placement (``FLYWHEEL_DEVICE``): ``auto`` picks CUDA with bf16 when a GPU is present (fp32 on a
GPU without bf16), CPU with fp32 otherwise; ``cpu`` and ``cuda`` force the device.

A LoRA version (``models/<version>/`` holding ``adapter_config.json`` and
``adapter_model.safetensors``, no full weights) names the full version it applies to in
``base_model.json`` (``{"version": "v0"}``; also the ``base_model`` of its lineage and card).
:func:`infra.serving.models.fetch_model` fetches that base beside it, and :func:`load_causal_lm`
loads the base and applies the adapter (merged for in-process serving: the same outputs, faster).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from infra.errors import ConfigError

log = logging.getLogger(__name__)

ADAPTER_CONFIG = "adapter_config.json"
BASE_MODEL_FILE = "base_model.json"
Device = Literal["auto", "cpu", "cuda"]


@dataclass(frozen=True)
class Placement:
    """Where a model runs: ``device`` ("cpu" / "cuda") and ``dtype`` ("float32" / "bfloat16")."""

    device: str
    dtype: str

    @property
    def torch_dtype(self) -> Any:
        """The ``torch`` dtype object named by ``dtype``."""
        import torch

        return getattr(torch, self.dtype)

    @property
    def bf16(self) -> bool:
        """Whether the model runs in bfloat16."""
        return self.dtype == "bfloat16"


def placement(device: Device = "auto") -> Placement:
    """The device and dtype for this machine (see the module docstring).

    Raises:
        ConfigError: ``cuda`` was asked for and no GPU is visible.
    """
    import torch

    cuda = torch.cuda.is_available()
    if device == "cuda" and not cuda:
        raise ConfigError("FLYWHEEL_DEVICE=cuda but torch sees no CUDA device")
    if device == "cpu" or not cuda:
        return Placement("cpu", "float32")
    return Placement("cuda", "bfloat16" if torch.cuda.is_bf16_supported() else "float32")


def is_adapter(path: str | Path) -> bool:
    """Whether ``path`` holds a peft LoRA adapter (not a full model)."""
    return (Path(path) / ADAPTER_CONFIG).is_file()


def adapter_base(path: str | Path) -> str:
    """The full model version a LoRA adapter directory applies to.

    Raises:
        ConfigError: the adapter does not name its base.
    """
    try:
        return str(json.loads((Path(path) / BASE_MODEL_FILE).read_text())["version"])
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"LoRA adapter at {path} does not name its base model: {exc}") from None


def write_adapter_base(path: str | Path, version: str) -> None:
    """Record in the adapter directory ``path`` the full model version it applies to."""
    (Path(path) / BASE_MODEL_FILE).write_text(json.dumps({"version": version}) + "\n")


def root_dir(path: str | Path, base_dir: str | Path | None = None) -> Path:
    """The full model directory under ``path``: ``path`` itself, or for an adapter ``base_dir``
    (default: its base version beside it, where :func:`infra.serving.models.fetch_model` puts
    it)."""
    path = Path(path)
    if not is_adapter(path):
        return path
    root = Path(base_dir) if base_dir else path.parent / adapter_base(path)
    if not (root / "config.json").is_file():
        raise ConfigError(f"the base model of the LoRA adapter at {path} is not at {root}")
    return root


def load_causal_lm(
    path: str | Path,
    *,
    where: Placement,
    base_dir: str | Path | None = None,
    trainable_adapter: bool = False,
) -> Any:
    """The model at ``path`` on ``where``: a full model, or an adapter applied to its base
    (merged, unless ``trainable_adapter``: then the peft model, adapter weights trainable).

    Raises:
        ConfigError: not a loadable model, or an adapter without its base.
    """
    from transformers import AutoModelForCausalLM

    path = Path(path)
    root = root_dir(path, base_dir)
    try:
        model: Any = AutoModelForCausalLM.from_pretrained(
            str(root), local_files_only=True, dtype=where.torch_dtype
        )
        if root != path:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(path), is_trainable=trainable_adapter)
            if not trainable_adapter:
                model = model.merge_and_unload()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the causal LM at {path}: {exc}") from exc
    if where.device != "cpu":
        model = model.to(where.device)
    log.info("loaded %s on %s (%s)", path.name, where.device, where.dtype)
    return model


def warmup_cosine(warmup_steps: int, steps: int) -> Callable[[int], float]:
    """The learning-rate factor of step ``step`` (from 0) for ``torch``'s ``LambdaLR``: linear
    warm-up over ``warmup_steps``, then cosine decay to 10 % at ``steps``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        done = (step - warmup_steps) / max(1, steps - warmup_steps)
        return 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, done)))

    return factor
