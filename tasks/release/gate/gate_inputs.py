"""What the release gate is asked with (:class:`GateInputs`): the golden set and its version,
the baseline and candidate answer sources, the scorer, the policy and the PII analyser, built
in one place for the ``release`` flow (:mod:`tasks.release.machine.steps`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.serving.answers import open_answer_source
from tasks.golden import GoldenItem, golden_version, load_golden, settings_golden_set

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.runtime import Runtime
    from infra.serving.answers import AnswerSource
    from infra.settings import ReleaseSettings
    from tasks.pii.engine import PiiEngine
    from tasks.release.options import ReleaseOptions
    from tasks.reward import Scorer


@dataclass(frozen=True, kw_only=True)
class GateInputs:
    """What :func:`tasks.release.gate.gate.run_gate` is asked with: the golden items (of
    ``golden_version``, recorded in the report), the baseline and candidate answer sources,
    the scorer and the policy; ``pii``: the stage-3 analyser for the PII-leak check (None:
    skipped); ``workload``: whose release it gates (the report's); ``margin``: a cheaper
    model's non-inferiority gate (:mod:`tasks.release.gate.noninferiority`), ``cheaper``: it
    must also be cheaper."""

    items: Sequence[GoldenItem]
    baseline: AnswerSource
    candidate: AnswerSource
    scorer: Scorer
    policy: ReleaseSettings
    max_tokens: int = 16
    pii: PiiEngine | None = None
    workload: str | None = None
    margin: float | None = None
    cheaper: bool = True
    golden_version: str | None = None


def gate_inputs(
    rt: Runtime, opts: ReleaseOptions, policy: ReleaseSettings, *, version: str, stable: str
) -> GateInputs:
    """The gate's inputs for candidate ``version`` against ``opts.baseline`` (else ``stable``)."""
    items, golden = golden_set(rt, opts.golden_path, opts.workload)
    return GateInputs(
        items=items[: opts.max_golden_items],
        golden_version=golden,
        baseline=open_answer_source(opts.baseline or stable, settings=rt.settings, store=rt.store),
        candidate=open_answer_source(version, settings=rt.settings, store=rt.store),
        scorer=scorer(rt),
        policy=policy,
        max_tokens=rt.settings.gateway.max_new_tokens,
        pii=pii_engine(rt, policy),
        workload=opts.workload,
        margin=opts.gate_margin(rt.settings.distil.margin),
        cheaper=opts.cheaper,
    )


def golden_set(rt: Runtime, path: str | None, workload: str | None) -> tuple[list[GoldenItem], str]:
    """The run's golden set and its version: ``path``, else the one the settings name for
    ``workload`` (its own: FLYWHEEL_REWARD__GOLDEN_SETS or golden/<workload>/, else
    FLYWHEEL_REWARD__GOLDEN); items of a workload's own set are scored by its verifier."""
    if path:
        return load_golden(path, workload=workload), golden_version(path)
    return settings_golden_set(rt.settings.reward, workload, workloads=rt.settings.workloads)


def coverage_warnings(rt: Runtime, workload: str | None, golden: str) -> list[str]:
    """The gate report's warning when the last curate run found the golden set covering
    less of the workload's prompts than FLYWHEEL_CURATE__COVERAGE_MIN."""
    from tasks import golden_coverage
    from tasks.reward.verifiers import DEFAULT_WORKLOAD

    measured = golden_coverage.latest(rt.store, workload or DEFAULT_WORKLOAD)
    why = golden_coverage.gate_warning(
        measured, minimum=rt.settings.curate.coverage_min, golden_version=golden
    )
    return [why] if why else []


def scorer(rt: Runtime) -> Any:
    """The stage-2 reward scorer the gate and the shadow phase judge answers with."""
    from tasks.reward import Scorer

    return Scorer(rt.settings)


def pii_engine(rt: Runtime, policy: ReleaseSettings) -> Any:
    """The stage-3 analyser for the PII-leak check (None when the check is off)."""
    if not policy.pii_leak_check:
        return None
    from tasks.pii.engine import PiiConfig, load_engine

    return load_engine(PiiConfig.from_settings(rt.settings.curate))
