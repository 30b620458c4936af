"""One pre-training step of the demo base model (``tasks/bootstrap.py``): a batch of
synthetic non-golden questions with their answers, the loss on the answer only. With a
``hedge_share`` that share of answers is a hedge ("81 or 82"), as real chat models sometimes
pad an unsure answer; the default (0) draws nothing extra, so the default v0 is unchanged."""

from __future__ import annotations

import random
from typing import Any

from infra.local_lm import render_prompt
from tasks import domain


def training_text(item: domain.DomainItem, tokenizer: Any = None) -> tuple[str, str]:
    """(prompt, completion) exactly as the gateway will prompt the model: the tokenizer's chat
    template when it has one (the llama profile), else the demo prompt."""
    if getattr(tokenizer, "chat_template", None):
        from tasks.llama_profile import training_prompt

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


def train_step(
    model: Any,
    tokenizer: Any,
    opt: Any,
    rng: random.Random,
    size: int,
    *,
    hedge_share: float = 0.0,
) -> float:
    """One AdamW step on ``size`` fresh questions (a share hedged: see module); the loss."""
    import torch

    items = [domain.sample_question(rng) for _ in range(size)]
    items.sort(key=lambda it: len(it.question))  # two length buckets: little padding
    opt.zero_grad(set_to_none=True)
    total = 0.0
    half = size // 2
    for chunk in (items[:half], items[half:]):
        ids, labels = _batch(tokenizer, chunk, hedge_answers(chunk, rng, share=hedge_share))
        loss = model(input_ids=ids, labels=labels).loss * len(chunk) / size
        loss.backward()
        total += float(loss.detach())
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return total
