"""The arms of the ablation: what each one trains on (a view of the shared
:class:`~tasks.prove.traffic.Traffic`) and how (a :class:`~tasks.train.config.TrainConfig`
with the same budget for all), and :func:`run_arm`, which trains one arm for one seed and
scores it on the golden set through the release gate's decision rule.

==============  ==========================================================================
``loop``        the loop's default: DPO with the SFT term on the reward's preference pairs
``shuffled``    the control: the same pairs with chosen and rejected swapped at random
                (the reward's ranking within each prompt group replaced by a coin flip)
``rft``         SFT on the best rewarded answer of each prompt group
``grpo``        GRPO, online samples rewarded by the stage-2 reward
``dpo_plain``   DPO without the SFT term
``oracle_sft``  SFT on synthetic ground-truth answers to the same prompts (no traffic answers,
                no reward): the ceiling a labelled data set would give
==============  ==========================================================================
"""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.golden import GoldenItem, settings_golden, verified_scores
from tasks.reward.verifiers import DEFAULT_WORKLOAD
from tasks.train.config import Method, TrainConfig
from tasks.train.methods import Data
from tasks.train.pairs import Selection, completion_text
from tasks.train.rows import PromptCompletion, SelectedPair

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.settings import ReleaseSettings, RewardSettings, Settings


@dataclass(frozen=True)
class Arm:
    """One arm of the ablation: its name, label, method and SFT weight."""

    name: str
    label: str
    method: Method
    sft_weight: float = 1.0


ARMS: dict[str, Arm] = {
    a.name: a
    for a in (
        Arm("loop", "DPO + SFT term (the loop's default)", "dpo"),
        Arm("shuffled", "control: reward shuffled within prompt groups", "dpo"),
        Arm("rft", "RFT (SFT on the best rewarded answers)", "rft"),
        Arm("grpo", "GRPO (online, stage-2 reward)", "grpo"),
        Arm("dpo_plain", "plain DPO (no SFT term)", "dpo", sft_weight=0.0),
        Arm("oracle_sft", "oracle SFT on ground-truth answers (ceiling)", "rft"),
    )
}
LOOP, CONTROL = "loop", "shuffled"


def shuffled_pairs(pairs: list[SelectedPair], *, seed: int) -> list[SelectedPair]:
    """The same pairs with chosen / rejected swapped on a seeded coin flip each."""
    rng = random.Random(seed)
    out = []
    for p in pairs:
        if rng.random() < 0.5:
            p = SelectedPair(**{**p, "chosen": p["rejected"], "rejected": p["chosen"]})
            p["chosen_reward"], p["rejected_reward"] = p["rejected_reward"], p["chosen_reward"]
        out.append(p)
    return out


def oracle_rows(selection: Selection, *, reward: RewardSettings) -> list[PromptCompletion]:
    """One SFT row per prompt group of the traffic, completed with the true answer: the
    reference the workload's verifier gives (prompts it has none for are left out)."""
    from tasks.reward.scorer import run_sync
    from tasks.reward.verifiers import VerifierTrace, verifier_for

    rows: list[PromptCompletion] = []
    for p in selection.prompts:
        workload = p.get("workload") or DEFAULT_WORKLOAD
        trace = VerifierTrace(
            question=p["question"], contexts=list(p["contexts"]), answer="", workload=workload
        )
        answer = run_sync(verifier_for(reward, workload).verify(trace)).reference
        if answer is not None:
            rows.append({"prompt": p["prompt"], "completion": completion_text(p["prompt"], answer)})
    return rows


def arm_data(arm: Arm, selection: Selection, *, seed: int, reward: RewardSettings) -> Data:
    """The training data of ``arm`` (seeded where the arm draws at random)."""
    if arm.name == CONTROL:
        return {"pairs": shuffled_pairs(selection.pairs, seed=seed), "sft": [], "prompts": []}
    if arm.name == "oracle_sft":
        return {"pairs": [], "sft": oracle_rows(selection, reward=reward), "prompts": []}
    return {"pairs": selection.pairs, "sft": selection.sft, "prompts": selection.prompts}


def arm_config(arm: Arm, budget: TrainConfig, *, seed: int) -> TrainConfig:
    """The shared budget (steps, batch, learning rate) with the arm's method and seed."""
    return replace(budget, method=arm.method, sft_weight=arm.sft_weight, seed=seed)


@dataclass(kw_only=True)
class Baseline:
    """The base model's golden answers and scores (computed once, shared by every arm)."""

    model_dir: Path
    answers: list[str]
    scores: list[float]

    @property
    def accuracy(self) -> float:
        """The base model's golden accuracy."""
        return sum(self.scores) / max(1, len(self.scores))


@dataclass(kw_only=True)
class ArmRun:
    """One arm, one seed: golden accuracy, per-item scores and the gate's verdict."""

    arm: str
    seed: int
    accuracy: float
    scores: list[float]
    decision: str
    reasons: list[str]
    checks: dict[str, str]  # check name -> status
    train_items: int
    steps: int
    train_s: float
    eval_s: float
    mean_answer_chars: float
    metrics: dict[str, float] = field(default_factory=dict)


def golden_answers(
    model_dir: Path, golden: Sequence[GoldenItem], *, max_new_tokens: int = 16
) -> tuple[Any, list[str]]:
    """Greedy answers of a model to the golden questions, as the gateway renders the prompt."""
    from infra.serving.local_lm import LocalLM

    lm = LocalLM.load(model_dir)
    texts: list[str] = []
    for start in range(0, len(golden), 100):
        chunk = golden[start : start + 100]
        gens = lm.generate_batch(
            [lm.render([{"role": "user", "content": it.question}]) for it in chunk],
            temperature=0.0,
            max_new_tokens=max_new_tokens,
        )
        texts.extend(g.text for g in gens)
    return lm, texts


def golden_scores(
    golden: Sequence[GoldenItem], texts: list[str], *, reward: RewardSettings
) -> list[float]:
    """Each golden answer's score by its item's verifier (exact ground truth; an answer the
    verifier cannot tell counts 0)."""
    return [s or 0.0 for s in verified_scores(golden, texts, reward=reward)]


def gate_verdict(
    baseline: Baseline,
    scores: list[float],
    texts: list[str],
    *,
    golden: Sequence[GoldenItem],
    policy: ReleaseSettings,
    lms: tuple[Any, Any] | None = None,
) -> tuple[str, list[str], dict[str, str]]:
    """The release gate's decision rule on golden verifier scores, with its drift checks."""
    from tasks.release.gate.drift import diversity_check, kl_check, length_bias_check
    from tasks.release.gate.gate import paired_test
    from tasks.release.gate.superiority import decide

    test = paired_test(baseline.scores, scores, n_bootstrap=1000, seed=policy.seed)
    checks = [
        diversity_check(
            texts, baseline.answers, references=[it.reference for it in golden], policy=policy
        ),
        length_bias_check(
            baseline.scores,
            scores,
            baseline_answers=baseline.answers,
            candidate_answers=texts,
            policy=policy,
        ),
    ]
    if lms is not None:
        cand, base = lms
        prompts = [cand.render([{"role": "user", "content": it.question}]) for it in golden]
        checks.append(kl_check(cand, base, prompts=prompts, answers=texts, policy=policy))
    decision, reasons = decide(test, policy, checks=checks)
    return decision.value, reasons, {c.name: c.status for c in checks}


def run_arm(
    arm_name: str,
    *,
    seed: int,
    selection: Selection,
    budget: TrainConfig,
    baseline: Baseline,
    settings: Settings,
) -> ArmRun:
    """Train ``arm_name`` from the base model for ``seed``, answer the golden set, score and
    gate it (nothing published: the checkpoint lives in a temporary directory)."""
    from infra.serving.local_lm import LocalLM
    from tasks.train.trainer import train_model

    arm = ARMS[arm_name]
    config = arm_config(arm, budget, seed=seed)
    reward, policy = settings.reward, settings.release
    data = arm_data(arm, selection, seed=seed, reward=reward)
    items = len({"dpo": data["pairs"], "rft": data["sft"], "grpo": data["prompts"]}[arm.method])
    with tempfile.TemporaryDirectory(prefix=f"prove-{arm_name}-") as work:
        outcome = train_model(
            baseline.model_dir, Path(work) / "model", config=config, data=data, reward=reward
        )
        t0 = time.perf_counter()
        golden = settings_golden(reward)
        lm, texts = golden_answers(outcome.output_dir, golden)
        scores = golden_scores(golden, texts, reward=reward)
        base_lm = LocalLM.load(baseline.model_dir)
        decision, reasons, checks = gate_verdict(
            baseline, scores, texts, golden=golden, policy=policy, lms=(lm, base_lm)
        )
        eval_s = time.perf_counter() - t0
    return ArmRun(
        arm=arm_name,
        seed=seed,
        accuracy=sum(scores) / max(1, len(scores)),
        scores=scores,
        decision=decision,
        reasons=reasons,
        checks=checks,
        train_items=items,
        steps=outcome.steps,
        train_s=outcome.wall_s,
        eval_s=eval_s,
        mean_answer_chars=sum(map(len, texts)) / max(1, len(texts)),
        metrics=outcome.metrics,
    )
