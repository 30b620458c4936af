"""The hyperparameters of one stage-4 run, next to nothing else so that the trainer and the
method builders can both depend on it (recorded verbatim in the model's lineage)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from infra.settings import TrainSettings

Method = Literal["dpo", "rft", "grpo"]


@dataclass(kw_only=True)
class TrainConfig:
    """Hyperparameters of one stage-4 run (recorded verbatim in the model's lineage)."""

    method: Method = "dpo"
    learning_rate: float = 1e-4
    max_steps: int = 200
    batch_size: int = 16
    beta: float = 0.1
    sft_weight: float = 1.0  # weight of the SFT term next to the sigmoid DPO loss
    use_lora: bool = False
    lora_output: Literal["adapter", "merged"] = "adapter"  # publish the adapter, or merge it
    lora_r: int = 16
    lora_alpha: int = 32
    # None: c_attn for GPT-2, the attention and MLP projections for Llama, else every linear
    # but the head
    lora_target_modules: list[str] | None = None
    seed: int = 0
    max_length: int = 256
    logging_steps: int = 10
    gradient_checkpointing: bool = False  # TRL turns it on by default; it slows small models
    grpo_num_generations: int = 4
    grpo_max_completion_length: int = 8
    grpo_temperature: float = 1.0
    threads: int | None = None  # torch CPU threads while training (None: torch's default)
    max_shard_size: str = "2GB"  # full checkpoints are saved in safetensors shards of this size

    @classmethod
    def from_settings(
        cls,
        train: TrainSettings,
        *,
        method: Method,
        max_steps: int | None = None,
        demo_base: bool = False,
    ) -> TrainConfig:
        """``use_lora`` unset in the settings: LoRA for every base model except the embedded
        demo model (``demo_base``), which is small enough to train and publish whole."""
        use_lora = train.use_lora if train.use_lora is not None else not demo_base
        return cls(
            method=method,
            learning_rate=train.learning_rate,
            max_steps=max_steps or train.max_steps,
            batch_size=train.batch_size,
            beta=train.beta,
            sft_weight=train.sft_weight,
            use_lora=use_lora,
            lora_output=train.lora_output,
            seed=train.seed,
            threads=getattr(train, "threads", None),
            max_shard_size=train.max_shard_size,
        )

    def hyperparameters(self) -> dict[str, Any]:
        """What the lineage records: every field except those that do not apply to the method."""
        data = asdict(self)
        for name in ("lora_output", "max_shard_size"):  # how it is saved (lineage: base_model)
            data.pop(name)
        if self.method != "grpo":
            data = {k: v for k, v in data.items() if not k.startswith("grpo_")}
        if not self.use_lora:
            data = {k: v for k, v in data.items() if not k.startswith("lora_")}
        return data
