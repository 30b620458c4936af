"""Stage 4's settings: preference tuning and its rolling buffer (``FLYWHEEL_TRAIN__*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class TrainSettings(BaseModel):
    """Stage 4 preference tuning."""

    method: Literal["auto", "dpo", "rft", "grpo"] = "auto"
    min_pairs: int = 50
    min_margin: float = 0.2
    # the rolling buffer: examples created in the last buffer_days days (0: all), per workload
    # (workload_buffer_days overrides it for named workloads); buffer_windows > 0 additionally
    # keeps only that many of the newest hour windows
    buffer_days: float = Field(default=7, ge=0)
    workload_buffer_days: dict[str, float] = {}
    buffer_windows: int = 0
    learning_rate: float = 1e-4
    max_steps: int = 200
    batch_size: int = 16
    beta: float = 0.1
    sft_weight: float = 1.0
    use_lora: bool | None = None  # None: LoRA for every base model except the demo model
    lora_output: Literal["adapter", "merged"] = "adapter"  # publish the adapter, or merge it
    max_shard_size: str = "2GB"  # safetensors shards of full checkpoints (multipart uploads)
    seed: int = 0
    threads: int | None = None  # torch threads for training (default: torch's choice)
    # only rows whose model_version is the base version: each cycle learns from its own traffic
    on_policy: bool = False
    # `flywheel prove`'s results; auto never picks a method that regressed there at this data
    # size (default: $FLYWHEEL_HOME/prove/ablation.json)
    ablation_path: Path | None = None
