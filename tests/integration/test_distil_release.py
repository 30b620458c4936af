"""``flywheel distil`` then ``flywheel release V --non-inferior``, on real models: a student made
deliberately too small (1 layer, 16 wide) is rolled back at the non-inferiority gate, and a
student as accurate as its teacher at a fraction of its compute passes the gate.

The teacher is the small demo v0 (one layer, 128 wide) grown to four layers by three layers
that add nothing to the residual stream (their output projections zero): it answers exactly
as v0 does at about four times the compute. A one-layer student initialised from it
(``init: teacher`` keeps the last layer, the real one) and trained for one step at a learning
rate of 1e-9 answers as it does: non-inferior and measurably cheaper, a real student of a real
teacher through the same flows and gate, without minutes of training."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.catalog import append_rows, open_catalog
from infra.routing import RoutingState, load_state, save_state
from infra.serving import models
from infra.settings import get_settings
from infra.store import open_store
from tests.integration.test_train_methods import rows

pytestmark = pytest.mark.integration

STUDENTS = {
    "tiny": {"n_layer": 1, "n_embd": 16, "n_head": 1},  # far too small for the task
    "lean": {"n_layer": 1, "n_embd": 128, "n_head": 4},  # the teacher's one real layer
}
WINDOW = "2026-11-20T10:00:00Z"


def padded_teacher(v0: Path, out: Path, extra_layers: int = 3) -> Path:
    """``v0`` (one layer) with ``extra_layers`` inert layers in front of its own."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(str(v0))
    cfg = base.config.__class__.from_dict({**base.config.to_dict(), "n_layer": 1 + extra_layers})
    teacher = AutoModelForCausalLM.from_config(cfg)
    state = base.state_dict()
    with torch.no_grad():
        for name, param in teacher.state_dict().items():
            layer = name.split(".")[2] if name.startswith("transformer.h.") else None
            source = name if layer is None else name.replace(f".h.{layer}.", ".h.0.", 1)
            value = state[source]
            if layer is not None and int(layer) < extra_layers and ".c_proj." in name:
                value = torch.zeros_like(value)  # adds nothing: the layer is inert
            param.copy_(value)
    teacher.generation_config = base.generation_config
    teacher.save_pretrained(out)
    AutoTokenizer.from_pretrained(str(v0)).save_pretrained(out)
    return out


@pytest.fixture
def teacher_home(
    flywheel_home: Path,
    shared_bootstrap: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """v0 (the exploitable-judge test's prebuilt small base), the padded teacher published as
    v1 and routed as stable, and 60 verified answers of users in the training table."""
    from dataclasses import replace

    from tasks.demo.bootstrap import bootstrap_base_model
    from tests.e2e.test_exploitable_judge import SMALL

    monkeypatch.setenv("FLYWHEEL_BOOTSTRAP_HEDGE_SHARE", "0.45")  # the prebuilt build's input
    monkeypatch.setenv("FLYWHEEL_DISTIL__STUDENTS", json.dumps(STUDENTS))
    monkeypatch.setenv("FLYWHEEL_DISTIL__THREADS", "1")
    get_settings.cache_clear()
    settings = get_settings()
    store = open_store(settings)
    boot = bootstrap_base_model(store, settings=settings, config=replace(SMALL, hedge_share=0.45))
    models.publish_model_dir(store, "v1", padded_teacher(boot.model_dir, tmp_path / "teacher"))
    save_state(store, RoutingState(stable="v1"))
    planted = rows(WINDOW, 60)
    for row in planted:
        row["reward_judge"] = 1.0 if row["eligible_as"] == "train" else 0.0
    append_rows(open_catalog(settings), "training_examples", planted)
    monkeypatch.setenv("FLYWHEEL_TRAIN__BUFFER_DAYS", "0")
    get_settings.cache_clear()
    return settings


def _distil(student: str, monkeypatch: pytest.MonkeyPatch, **knobs: str) -> Any:
    from flows.distil import distil

    for name, value in knobs.items():
        monkeypatch.setenv(f"FLYWHEEL_DISTIL__{name.upper()}", value)
    get_settings.cache_clear()
    result = distil(student=student)
    assert result.status == "trained" and result.version, result.message
    assert result.teacher == "v1" and result.examples == 60
    return result


def test_a_too_small_student_is_rolled_back_and_a_lean_one_passes_the_gate(
    prefect_api: None, teacher_home: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.release import ReleaseOptions, release
    from infra.serving.answers import open_answer_source
    from tasks.golden import load_golden
    from tasks.release.gate.gate import Decision, run_gate
    from tasks.release.gate.gate_inputs import GateInputs
    from tasks.reward import Scorer

    tiny = _distil("tiny", monkeypatch, steps="20")
    lean = _distil("lean", monkeypatch, steps="1", learning_rate="1e-9", kd_weight="0")
    assert tiny.student_parameters is not None and tiny.teacher_parameters is not None
    assert tiny.student_parameters < tiny.teacher_parameters / 10
    assert lean.student_accuracy == pytest.approx(lean.teacher_accuracy, abs=0.01)
    assert tiny.student_accuracy is not None and lean.teacher_accuracy is not None
    assert tiny.student_accuracy < lean.teacher_accuracy - 0.2

    options = ReleaseOptions(non_inferior=True, margin=2.0, max_golden_items=120)
    out = release(tiny.version, options)
    assert out.outcome == "rolled_back", (out.outcome, out.reasons)
    assert any("worse than stable by more than the margin" in r for r in out.reasons), out.reasons
    assert load_state(open_store(teacher_home)).stable == "v1"

    settings = get_settings()
    store = open_store(settings)
    gate = run_gate(
        GateInputs(
            items=load_golden()[:120],
            baseline=open_answer_source("v1", settings=settings, store=store),
            candidate=open_answer_source(lean.version, settings=settings, store=store),
            scorer=Scorer(settings),
            policy=settings.release,
            max_tokens=settings.gateway.max_new_tokens,
            margin=2.0,
        )
    )
    assert gate.decision == Decision.PROCEED, gate.reasons
    assert gate.noninferiority is not None
    test, cost = gate.noninferiority["test"], gate.noninferiority["cost"]
    assert test["non_inferior"] and test["p_value"] < 0.05 and test["ci_low"] > -2.0
    assert cost["cheaper"] and cost["ratio"] < 1.0


def test_an_erasure_replacement_of_a_student_is_distilled_again_without_the_user(
    prefect_api: None, teacher_home: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replacement of a serving student keeps its profile and teacher, learns from the
    rows left once one user's are out, and names no such row or key in its lineage."""
    from infra.runtime import Runtime
    from tasks.distil.replace import redistil
    from tasks.governance.replacement import ReplacementPlan
    from tasks.train.erasures import reproduce_training_rows
    from tasks.train.lineage import read_lineage

    lean = _distil("lean", monkeypatch, steps="1", learning_rate="1e-9", kd_weight="0")
    rt = Runtime.from_env()
    recipe = read_lineage(rt.store, lean.version)
    assert recipe.method == "distil" and recipe.student is not None
    assert "key-0" in recipe.data.user_keys
    trained = reproduce_training_rows(rt.catalog, rt.store, recipe).rows.to_pylist()
    left = [r for r in trained if r["user_key"] != "key-0"]
    plan = ReplacementPlan(
        serving=lean.version, base="v1", recipe=recipe, chain=[lean.version], rows=left
    )

    version = redistil(rt, plan, max_steps=1)

    assert version is not None and version != lean.version
    again = read_lineage(rt.store, version)
    assert again.method == "distil" and again.base_version == "v1"
    assert again.student is not None and again.student["shape"] == recipe.student["shape"]
    assert "key-0" not in again.data.user_keys and again.data.user_keys
    erased = {r["trace_id"] for r in trained if r["user_key"] == "key-0"}
    assert erased and not erased & set(again.data.training_examples.trace_ids)
    assert again.hyperparameters["steps"] == 1
