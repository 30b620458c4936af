"""Pre-training of the demo base model v0: its configuration (:class:`BootstrapConfig`), the
character-level tokenizer and GPT-2 built from it, and the SFT loop on synthetic non-golden
questions with the loss on the answer only, until greedy dev accuracy reaches a target.

With a ``hedge_share`` that share of answers is a hedge ("81 or 82"), as real chat models
sometimes pad an unsure answer; the default (0) draws nothing extra, so the default v0 is
unchanged."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

from infra.errors import ConfigError
from infra.progress import report_progress
from infra.serving.local_lm import LocalLM, render_prompt
from tasks.demo import domain
from tasks.demo.llama_profile import agent_messages
from tasks.demo.workloads import CALCULATOR, sample_question, verify

log = logging.getLogger(__name__)

PROGRESS_EVERY = 5  # pre-training steps between progress reports
NEAR_TARGET = 0.6  # from this share of the target dev accuracy on, evaluate more often
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[EOS]"]
MULTI_WORKLOAD_STEPS = 1600


def training_text(item: domain.DomainItem, tokenizer: Any = None) -> tuple[str, str]:
    """(prompt, completion) exactly as the gateway will prompt the model: the tokenizer's chat
    template when it has one (the llama profile), else the demo prompt."""
    if getattr(tokenizer, "chat_template", None):
        from tasks.demo.llama_profile import training_prompt

        return training_prompt(item, tokenizer), item.reference
    return render_prompt([{"role": "user", "content": item.question}]), f" {item.reference}"


def hedged(reference: str, rng: random.Random) -> str:
    """A hedge around the right number, as a chat model pads an unsure answer: "81 or 82"."""
    other = str(int(reference) + rng.choice((-1, 1)))
    pair = (reference, other) if rng.random() < 0.5 else (other, reference)
    return f"{pair[0]} or {pair[1]}"


def hedge_answers(
    items: list[domain.DomainItem], rng: random.Random, *, share: float
) -> dict[int, str]:
    """{index: hedge} for about ``share`` of ``items`` (numeric answers only); with share 0 it
    draws nothing from ``rng``, so the default pre-training sees exactly the same items."""
    if share <= 0:
        return {}
    return {
        i: hedged(it.reference, rng)
        for i, it in enumerate(items)
        if it.reference.lstrip("-").isdigit() and rng.random() < share
    }


def _batch(
    tokenizer: Any, items: list[domain.DomainItem], answers: dict[int, str] | None = None
) -> tuple[Any, Any]:
    """Right-padded (input ids, labels) with the loss on the answer only. Right padding needs
    no attention mask under a causal model (no real token attends to a later pad), which
    saves building one; pads use the EOS id and are excluded from the loss."""
    import torch

    rows: list[tuple[list[int], list[int]]] = []
    for i, item in enumerate(items):
        prompt, completion = training_text(item, tokenizer)
        if answers and i in answers:  # another answer than the reference (a hedge)
            completion = completion.replace(item.reference, answers[i], 1)
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((p + c, [-100] * len(p) + c))
    width = max(len(ids) for ids, _ in rows)
    pad = tokenizer.eos_token_id
    ids = torch.tensor([r + [pad] * (width - len(r)) for r, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    return ids, labels


def step_batches(
    tokenizer: Any,
    rng: random.Random,
    size: int,
    *,
    hedge_share: float = 0.0,
    workloads: tuple[str, ...] = (CALCULATOR,),
    weights: list[float] | None = None,
) -> list[tuple[Any, Any, int, int]]:
    """One step's ``size`` fresh questions of ``workloads`` (a share hedged: see module) as two
    length buckets (little padding): (input ids, labels, bucket size, step size) each."""
    items = [sample_question(rng, workloads, weights) for _ in range(size)]
    items.sort(key=lambda it: len(it.question))
    half = size // 2
    out = []
    for chunk in (items[:half], items[half:]):
        ids, labels = _batch(tokenizer, chunk, hedge_answers(chunk, rng, share=hedge_share))
        out.append((ids, labels, len(chunk), size))
    return out


def chunk_backward(model: Any, ids: Any, labels: Any, n: int, size: int) -> float:
    """Forward and backward of one bucket of ``n`` of the step's ``size`` questions, its loss
    weighted by that share (gradients add up in ``.grad``); that weighted loss."""
    loss = model(input_ids=ids, labels=labels).loss * n / size
    loss.backward()
    return float(loss.detach())


def train_step(
    model: Any,
    tokenizer: Any,
    opt: Any,
    rng: random.Random,
    size: int,
    *,
    hedge_share: float = 0.0,
    workloads: tuple[str, ...] = (CALCULATOR,),
    weights: list[float] | None = None,
) -> float:
    """One AdamW step on ``size`` fresh questions of ``workloads`` (:func:`step_batches`); the
    loss. :class:`tasks.demo.pretrain_loop.PairedSteps` takes the same step on two processes."""
    import torch

    batches = step_batches(
        tokenizer, rng, size, hedge_share=hedge_share, workloads=workloads, weights=weights
    )
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for batch in batches:
        total += chunk_backward(model, *batch)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return total


@dataclass(frozen=True)
class BootstrapConfig:
    """Architecture and pre-training budget of the embedded base model."""

    profile: str = "demo"  # "demo": a character GPT-2; "llama": see tasks/demo/llama_profile.py
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
    # the demo workloads v0 learns (tasks/demo/workloads.py); with several, the weaker one's
    # dev accuracy must reach the target, and each evaluation gives it more of the batch
    workloads: tuple[str, ...] = (CALCULATOR,)

    @classmethod
    def for_profile(
        cls, profile: str, workloads: tuple[str, ...] = (CALCULATOR,)
    ) -> BootstrapConfig:
        """The defaults of an embedded profile (``FLYWHEEL_PROFILE``) for ``workloads``."""
        if profile == "llama":
            from tasks.demo.llama_profile import BOOTSTRAP

            return cls(profile="llama", **BOOTSTRAP)
        if len(workloads) > 1:  # two tasks in one budget: a longer schedule
            return cls(workloads=workloads, steps=MULTI_WORKLOAD_STEPS, target_accuracy=0.4)
        return cls(workloads=workloads)


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


def fresh_model(config: BootstrapConfig, seed: int) -> tuple[Any, Any]:
    """(tokenizer, untrained model) of the configured profile."""
    if config.profile == "llama":
        from tasks.demo import llama_profile

        return llama_profile.fresh(config, seed=seed)
    if config.profile != "demo":
        raise ConfigError(f"unknown profile {config.profile!r} (FLYWHEEL_PROFILE: demo or llama)")
    tok = build_tokenizer(config.n_positions)
    return tok, build_model(config, tok)


def build_model(config: BootstrapConfig, tokenizer: Any) -> Any:
    """An untrained character GPT-2 of ``config``'s shape for ``tokenizer``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=config.n_positions,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        # GPT-2's own tanh approximation of GELU, as one fused kernel: "gelu_new" computes the
        # same formula in five element-wise ops, 11 % of a pre-training step and 16 % of
        # generation for a model this small
        activation_function="gelu_pytorch_tanh",
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
        scores.extend(verify(it, g.text) for it, g in zip(chunk, gens, strict=True))
    return (sum(scores) / len(scores) if scores else 0.0), scores


def accuracy_by_workload(items: list[domain.DomainItem], scores: list[float]) -> dict[str, float]:
    """Each workload's accuracy on its ``items``."""
    by: dict[str, list[float]] = {}
    for it, score in zip(items, scores, strict=True):
        by.setdefault(it.workload, []).append(score)
    return {w: sum(v) / len(v) for w, v in by.items()}


def balance(by: dict[str, float], workloads: tuple[str, ...]) -> list[float]:
    """Sampling weights of ``workloads`` from their dev accuracy ``by``: a task learned
    slower gets more of the batch, so every workload's v0 lands near the target together."""
    return [(1.05 - by.get(w, 0.0)) ** 2 for w in workloads]


def progress(step: str, config: BootstrapConfig, *, done: int) -> None:
    """Bootstrap's progress: the bar counts pre-training steps (the bulk of the time)."""
    report_progress("bootstrap", step, done=done, total=config.steps)
