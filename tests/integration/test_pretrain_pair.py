"""Pre-training v0 on two processes (tasks/demo/pretrain_loop.py) gives the very model one
process gives, also when the helper process dies half-way: v0's cache key does not change."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
import torch

from infra.serving.local_lm import intra_op_threads
from tasks.demo.pretrain import BootstrapConfig, fresh_model, train_step
from tasks.demo.pretrain_loop import PairedSteps, pretrain, second_cpu

pytestmark = pytest.mark.skipif(not second_cpu(), reason="needs a second CPU")

CONFIG = replace(
    BootstrapConfig.for_profile("demo", ("calculator", "clock")),
    steps=6,
    min_steps=3,
    eval_every=3,
    batch_size=16,
    dev_items=150,  # two generation batches of 100 and 50: one on each process
)


def _weights(model: Any) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_two_processes_train_the_same_model_as_one() -> None:
    runs = {}
    for helper in (False, True):
        torch.manual_seed(0)
        tokenizer, model = fresh_model(CONFIG, 0)
        log = pretrain(model, tokenizer, CONFIG, 0, helper=helper)
        runs[helper] = (log, _weights(model))
    (alone, weights_alone), (paired, weights_paired) = runs[False], runs[True]
    assert (alone.processes, paired.processes) == (1, 2)
    assert paired.losses == alone.losses and len(paired.losses) == CONFIG.steps
    assert paired.curve == alone.curve and [s for s, _ in paired.curve] == [3, 6]
    assert weights_paired.keys() == weights_alone.keys()
    for name, value in weights_alone.items():
        assert torch.equal(weights_paired[name], value), name


def test_a_helper_that_dies_leaves_the_steps_as_they_were() -> None:
    with intra_op_threads(1):  # as pretrain() and the helper run
        _steps_with_a_helper_that_dies()


def _steps_with_a_helper_that_dies() -> None:
    torch.manual_seed(0)
    tokenizer, alone = fresh_model(CONFIG, 0)
    opt = torch.optim.AdamW(alone.parameters(), lr=CONFIG.learning_rate)
    rng = random.Random(0)
    expected = [train_step(alone, tokenizer, opt, rng, 16) for _ in range(4)]

    torch.manual_seed(0)
    tokenizer, model = fresh_model(CONFIG, 0)
    rng = random.Random(0)
    with PairedSteps(model, CONFIG, 0) as pair:
        opt = torch.optim.AdamW(model.parameters(), lr=CONFIG.learning_rate)
        losses = [pair.train_step(tokenizer, opt, rng, 16) for _ in range(2)]
        assert pair.paired
        pair._proc.kill()  # the helper dies between two steps
        losses += [pair.train_step(tokenizer, opt, rng, 16) for _ in range(2)]
        assert not pair.paired  # the rest on this process alone
    assert losses == expected
    for name, value in _weights(alone).items():
        assert torch.equal(_weights(model)[name], value), name
