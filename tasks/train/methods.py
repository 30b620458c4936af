"""Stage 4 methods: which one a run uses (:func:`choose_method`) and how TRL builds each.

    ``dpo``  ``DPOTrainer`` with ``loss_type=["sigmoid", "sft"]``: plain DPO can lower the
             likelihood of good answers on small models; the SFT term on the chosen answers
             keeps it up (``flywheel prove`` compares both).
    ``rft``  ``SFTTrainer`` on the best answer of each prompt group that passed every gate.
    ``grpo`` ``GRPOTrainer`` sampling online, rewarded by the stage-2 reward: the configured judge
             or verifier (the same one stage 2 uses for the prompt's workload: the LLM judge,
             a plug-in verifier, or the demo calculator) and faithfulness to the contexts,
             combined with the stage-2 weights.
    ``auto`` picks by data size (:func:`choose_method`): ``>= min_pairs`` pairs -> dpo; fewer
             pairs but ``>= min_pairs`` high-reward answers -> rft; else skipped. It never picks
             grpo (online sampling is the costly path: ask for it when a programmatic reward
             exists and the pairs run dry), nor a method that regressed in ``flywheel prove``
             at this data size (``regressed``, :mod:`tasks.train.evidence`).

A builder makes the method's TRL trainer from the TrainingArguments every method shares
(``common``) and the trainer keywords every method shares (``model``, ``processing_class``,
``callbacks``, ``peft_config``); :func:`tasks.train.trainer.train_model` runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, cast

from tasks.train.config import Method

if TYPE_CHECKING:
    from infra.settings import RewardSettings, Settings
    from tasks.datasets import PreferencePair
    from tasks.train.config import TrainConfig
    from tasks.train.rows import PromptCompletion, PromptRow


class Data(TypedDict):
    """A run's training data: ``pairs`` for dpo, ``sft`` for rft, ``prompts`` for grpo."""

    pairs: Sequence[PreferencePair]
    sft: Sequence[PromptCompletion]
    prompts: Sequence[PromptRow]


@dataclass(kw_only=True)
class MethodChoice:
    """The method a run uses (``None``: skipped) and why, in words for the run's artifact."""

    method: Method | None
    reason: str
    available: int  # training items for the method considered (pairs, singles or prompts)


def choose_method(
    requested: str,
    *,
    pairs: int,
    singles: int,
    prompts: int,
    min_pairs: int,
    regressed: dict[str, str] | None = None,
) -> MethodChoice:
    """Resolve ``auto`` by data size (never to a method in ``regressed``: method -> why), and
    skip any method whose data is below ``min_pairs``."""
    if requested == "auto":
        avoid = regressed or {}
        note = "".join(f"; not {m}: {why}" for m, why in sorted(avoid.items()))
        if pairs >= min_pairs and "dpo" not in avoid:
            reason = f"auto: {pairs} pairs >= minimum {min_pairs} -> dpo{note}"
            return MethodChoice(method="dpo", reason=reason, available=pairs)
        if singles >= min_pairs and "rft" not in avoid:
            reason = (
                f"auto: {pairs} pairs < minimum {min_pairs}, {singles} high-reward answers -> rft"
                if "dpo" not in avoid
                else f"auto: {singles} high-reward answers -> rft"
            )
            return MethodChoice(method="rft", reason=reason + note, available=singles)
        reason = f"skipped: {pairs} pairs < minimum {min_pairs}" if not avoid else "skipped"
        return MethodChoice(method=None, reason=reason + note, available=pairs)
    available = {"dpo": pairs, "rft": singles, "grpo": prompts}[requested]
    noun = {"dpo": "pairs", "rft": "high-reward answers", "grpo": "prompts"}[requested]
    if available < min_pairs:
        reason = f"skipped: {available} {noun} < minimum {min_pairs}"
        return MethodChoice(method=None, reason=reason, available=available)
    reason = f"requested {requested}: {available} {noun}"
    return MethodChoice(method=cast(Method, requested), reason=reason, available=available)


def grpo_reward(reward: Settings | RewardSettings) -> Callable[..., list[float | None]]:
    """The stage-2 reward as a GRPO reward function: the judge or verifier stage 2 uses for
    each prompt's workload, and faithfulness to the contexts, weighted as in stage 2
    (components that cannot be scored drop out). Context recall and feedback are left out:
    they do not depend on the completion, so they move no group-relative advantage.
    ``reward`` is the whole settings, or only their reward part (then the judge is the
    default of the settings in the environment)."""
    from infra.settings import RewardSettings, Settings
    from tasks.reward import ScoreItem, Scorer, combine, run_sync

    if isinstance(reward, RewardSettings):
        from infra.settings import get_settings

        settings = get_settings().model_copy(update={"reward": reward})
    else:
        settings = cast(Settings, reward)

    def reward_fn(
        prompts: list[Any],  # noqa: ARG001 - TRL passes prompts and completions by name
        completions: list[Any],
        question: list[str],
        contexts: list[list[str]],
        workload: list[str] | None = None,
        **_: Any,
    ) -> list[float | None]:
        items = []
        for i, (text, q, ctx) in enumerate(zip(completions, question, contexts, strict=True)):
            answer = text if isinstance(text, str) else str(text[-1]["content"])
            answer = answer.strip().split("\n", 1)[0]
            w = (workload[i] if workload else None) or "default"
            items.append(ScoreItem(question=q, contexts=list(ctx), answer=answer, workload=w))
        parts = run_sync(Scorer(settings).acomponents(items, {"judge", "faithfulness"}))
        return [combine(dict(p), settings.reward).total for p in parts]

    reward_fn.__name__ = "stage2_reward"
    return reward_fn


def _dpo(config: TrainConfig, *, data: Data, common: dict[str, Any], **trainer_kw: Any) -> Any:
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    rows = [
        {"prompt": p["prompt"], "chosen": p["chosen"], "rejected": p["rejected"]}
        for p in data["pairs"]
    ]
    args = DPOConfig(
        **common,
        beta=config.beta,
        loss_type=["sigmoid", "sft"],
        loss_weights=[1.0, config.sft_weight],
        precompute_ref_log_probs=True,
        max_length=config.max_length,
    )
    return DPOTrainer(args=args, train_dataset=Dataset.from_list(rows), **trainer_kw)


def _rft(config: TrainConfig, *, data: Data, common: dict[str, Any], **trainer_kw: Any) -> Any:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    rows = [{"prompt": s["prompt"], "completion": s["completion"]} for s in data["sft"]]
    args = SFTConfig(**common, max_length=config.max_length, completion_only_loss=True)
    return SFTTrainer(args=args, train_dataset=Dataset.from_list(rows), **trainer_kw)


def _grpo(
    config: TrainConfig,
    *,
    data: Data,
    common: dict[str, Any],
    reward: Settings | RewardSettings | None = None,
    **trainer_kw: Any,
) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from infra.settings import RewardSettings

    rows = [
        {
            "prompt": p["prompt"],
            "question": p["question"],
            "contexts": p["contexts"],
            "workload": p.get("workload"),
        }
        for p in data["prompts"]
    ]
    if not any(r["workload"] for r in rows):  # no workloads recorded: one default workload
        rows = [{k: v for k, v in r.items() if k != "workload"} for r in rows]
    args = GRPOConfig(
        **common,
        beta=config.beta,
        num_generations=config.grpo_num_generations,
        max_completion_length=config.grpo_max_completion_length,
        temperature=config.grpo_temperature,
    )
    return GRPOTrainer(
        reward_funcs=grpo_reward(reward or RewardSettings()),
        args=args,
        train_dataset=Dataset.from_list(rows),
        **trainer_kw,
    )


BUILDERS: dict[str, Callable[..., Any]] = {"dpo": _dpo, "rft": _rft, "grpo": _grpo}
