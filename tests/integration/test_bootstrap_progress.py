"""``flywheel bootstrap`` is not silent for minutes: each step of building v0 is reported
(rendered as timestamped lines when stderr is not a terminal)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from deployments.progress import showing_progress
from infra.settings import Settings
from infra.store import LocalStore
from tasks.demo.bootstrap import bootstrap_base_model
from tasks.demo.pretrain import BootstrapConfig

pytestmark = pytest.mark.integration

TINY = BootstrapConfig(n_layer=1, n_embd=32, n_head=2, n_positions=64, steps=12, batch_size=8)


def test_bootstrap_reports_each_step_and_a_cache_hit(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    store = LocalStore(settings.resolved_store_url)

    out = io.StringIO()
    with showing_progress(out):
        bootstrap_base_model(store, settings=settings, config=TINY)
    steps = [line[9:] for line in out.getvalue().splitlines()]
    assert steps == [
        "bootstrap [0/12] build the tokenizer and the model",
        "bootstrap [0/12] pre-train on the demo domain (until dev accuracy 50%)",
        "bootstrap [12/12] evaluate v0 on the golden set",
        "bootstrap [12/12] register v0 in the store",
    ]

    again = io.StringIO()
    with showing_progress(again):
        assert bootstrap_base_model(store, settings=settings, config=TINY).cached
    assert [line[9:] for line in again.getvalue().splitlines()] == [
        "bootstrap [12/12] v0 is already built (cached)"
    ]
