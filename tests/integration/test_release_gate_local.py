"""The gate on in-process models fetched from the store (the embedded generation path): a tiny
GPT-2 built from a config, an identical copy, and copies with perturbed weights. KL is computed
from both models' forward passes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from infra.serving import models
from infra.serving.answers import open_answer_source
from infra.settings import ReleaseSettings, Settings
from infra.store import LocalStore
from tasks.golden import load_golden
from tasks.release.gate.gate import Decision, run_gate
from tasks.release.gate.gate_inputs import GateInputs

pytestmark = pytest.mark.integration


def tiny_model(path: Path) -> Path:
    import torch

    from tasks.demo.pretrain import BootstrapConfig, build_model, build_tokenizer

    torch.manual_seed(0)
    cfg = BootstrapConfig(n_layer=1, n_embd=32, n_head=2, n_positions=64)
    tokenizer = build_tokenizer(cfg.n_positions)
    build_model(cfg, tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def perturbed(src: Path, dst: Path, scale: float) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    weights = load_file(str(src / "model.safetensors"))
    gen = torch.Generator().manual_seed(1)
    noisy = {k: v + scale * torch.randn(v.shape, generator=gen) for k, v in weights.items()}
    save_file(noisy, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, LocalStore]:
    root = tmp_path_factory.mktemp("gate-local")
    settings = Settings(home=root / "home")
    store = LocalStore(settings.resolved_store_url)
    base = tiny_model(root / "v0")
    models.publish_model_dir(store, "v0", base)
    models.publish_model_dir(store, "v1", base)  # an identical copy
    models.publish_model_dir(store, "v2", perturbed(base, root / "v2", 0.02))
    models.publish_model_dir(store, "v3", perturbed(base, root / "v3", 0.2))
    return settings, store


def gate(published: tuple[Settings, LocalStore], version: str, **drift: float):
    from tasks.reward import Scorer

    settings, store = published
    return run_gate(
        GateInputs(
            items=load_golden()[:48],
            baseline=open_answer_source("v0", settings=settings, store=store),
            candidate=open_answer_source(version, settings=settings, store=store),
            scorer=Scorer(settings),
            policy=ReleaseSettings(n_bootstrap=1000, min_samples=30, **drift),
            max_tokens=8,
        )
    )


def test_identical_copy_is_held_for_review_with_zero_kl(published) -> None:
    result = gate(published, "v1")
    assert result.decision == Decision.MANUAL_REVIEW
    assert result.test.nonzero_pairs == 0 and result.test.p_value == 1.0
    kl = next(c for c in result.checks if c.name == "kl")
    assert kl.status == "pass" and kl.value == pytest.approx(0.0, abs=1e-6)
    assert [it.candidate_answer for it in result.items] == [
        it.baseline_answer for it in result.items
    ]


def test_kl_grows_with_the_weight_perturbation_and_can_fail_the_check(published) -> None:
    small = next(c for c in gate(published, "v2").checks if c.name == "kl")
    large = next(c for c in gate(published, "v3", kl_max=0.05).checks if c.name == "kl")
    assert small.value is not None and large.value is not None
    assert 0 < small.value < large.value
    assert large.status == "fail" and "nats/token" in large.detail
