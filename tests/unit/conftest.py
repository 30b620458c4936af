"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest

from infra.serving.local_lm import LocalLM
from tasks.demo.pretrain import BootstrapConfig, build_model, build_tokenizer


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> LocalLM:
    """An untrained 1-layer char GPT-2 with a 48-token context (one per test module): its
    answers are noise, so it tests mechanics, not quality, and every sampled token is a real
    draw."""
    import torch

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny")
    cfg = BootstrapConfig(n_layer=1, n_embd=32, n_head=2, n_positions=48)
    tok = build_tokenizer(cfg.n_positions)
    build_model(cfg, tok).save_pretrained(path)
    tok.save_pretrained(path)
    return LocalLM.load(path)
