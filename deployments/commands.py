"""What each ``flywheel`` command does: start the stage's flow run (so it shows in the Prefect
UI) and print a short human summary. The parser and the command table are in
:mod:`deployments.cli`; every handler takes the parsed arguments and returns the exit code.

Flows and tasks are imported inside the handlers: ``flywheel --help`` stays fast."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from deployments.output import FAILED, emit, error


class Percent(float):
    """A share: a number in ``--json``, ``62.5%`` in the text summary."""

    def __str__(self) -> str:
        return f"{self:.1%}"


def percent_or_none(value: float | None) -> Percent | None:
    """``value`` as a Percent, None kept."""
    return None if value is None else Percent(value)


# ------------------------------------------------------------------ stages 1-3 (hourly)


def collect(ns: argparse.Namespace) -> int:
    """flywheel collect: stage 1 on a window."""
    from flows.collect import collect as collect_flow

    r = collect_flow(window_start=ns.window_start, hours=ns.hours)
    fields: dict[str, Any] = {
        "window": r.window,
        "hours": ns.hours,
        "read": r.read,
        "written": r.written,
        "quarantined": r.quarantined,
        "opted_out": r.opted_out,
        "duplicates": r.duplicates,
        "output": r.key,
    }
    if r.read == 0:
        fields["note"] = _empty_window_note("collect", r.window)
    emit(ns, "collect", fields)
    return 0


def score(ns: argparse.Namespace) -> int:
    """flywheel score: stage 2 on a window."""
    from flows.score import score as score_flow

    r = score_flow(window_start=ns.window_start, hours=ns.hours)
    fields: dict[str, Any] = {
        "window": r.window,
        "hours": ns.hours,
        "status": r.status,
        "windows_scored": r.windows,
        "traces": r.traces,
        "mean_reward": r.reward_mean,
        "missing_components": {k: v for k, v in r.missing.items() if v},
        "judge": r.judge_kind,
        "output": r.keys,
    }
    if r.status == "no_rollouts":
        fields["note"] = _empty_window_note("score", r.window)
    emit(ns, "score", fields)
    return 0


def curate(ns: argparse.Namespace) -> int:
    """flywheel curate: stage 3 on a window."""
    from flows.curate import curate as curate_flow

    r = curate_flow(window_start=ns.window_start)
    fields: dict[str, Any] = {
        "window": r.window,
        "read": r.read,
        "written": r.written,
        "train": r.train,
        "rejected_only": r.rejected_only,
        "held_back": r.k_withheld,
        "released_from_earlier": r.released,
        "quarantined": r.quarantined,
        "withdrawn": r.withdrawn,
        "pii_entities_removed": sum(r.pii_entities.values()),
        "dropped": {k: v for k, v in r.dropped.items() if v},
        "snapshot": r.snapshot_id,
    }
    for workload, cov in (r.coverage or {}).items():
        fields[f"golden_coverage_{workload}"] = (
            f"{cov['coverage']:.0%} of {cov['prompts']} prompts (golden {cov['golden_version']})"
        )
        for i, c in enumerate(cov["clusters"], start=1):
            example = c["example"] or "(no example: none released by k-anonymity)"
            fields[f"uncovered_{workload}_{i}"] = f"{c['size']} prompts, e.g. {example!r}"
    if r.read == 0:
        fields["note"] = _empty_window_note("curate", r.window)
    emit(ns, "curate", fields)
    return 0


def _empty_window_note(stage: str, window: str) -> str:
    from deployments.hints import empty_window_note
    from infra.runtime import Runtime

    rt = Runtime.from_env()
    source = rt.settings.trace_source
    return empty_window_note(rt.store, stage=stage, window=window, source=source)


# ------------------------------------------------------- the demo domain and the gateway


def bootstrap(ns: argparse.Namespace) -> int:
    """flywheel bootstrap: the demo base model v0 (cached)."""
    from deployments.progress import showing_progress
    from infra.runtime import Runtime
    from tasks.demo.bootstrap import bootstrap_base_model

    rt = Runtime.from_env()
    with showing_progress():
        r = bootstrap_base_model(rt.store, settings=rt.settings, seed=ns.seed, force=ns.force)
    fields = {
        "version": r.version,
        "cached": r.cached,
        "source": r.source,
        "parameters": r.n_params,
        "golden_accuracy": Percent(r.golden_accuracy),
        "wall_s": round(r.wall_s, 1),
        "local_copy": str(r.model_dir),
    }
    emit(ns, "bootstrap", fields)
    return 0


def gateway(ns: argparse.Namespace) -> int:  # noqa: ARG001 - every command takes its namespace
    """flywheel gateway: serve the gateway until interrupted."""
    from infra.gateway.serve import serve_gateway
    from infra.settings import get_settings

    serve_gateway(get_settings(), announce=lambda line: print(line, flush=True))
    return 0


def simulate(ns: argparse.Namespace) -> int:
    """flywheel simulate: simulated users through the gateway."""
    from infra.settings import get_settings
    from tasks.demo.simulate import simulate as simulate_users

    s = get_settings()
    url = ns.gateway_url or s.gateway.url or f"http://{s.gateway.host}:{s.gateway.port}"
    r = simulate_users(
        url, requests=ns.requests, concurrency=ns.concurrency, seed=ns.seed, settings=s
    )
    fields = {
        "gateway": url,
        "requests": r.requests,
        "succeeded": r.succeeded,
        "failed": r.failed,
        "users": r.active_users,
        "with_personal_data": r.requests_with_pii,
        "from_opted_out_users": r.opted_out_requests,
        "feedback": {"up": r.feedback[1], "down": r.feedback[-1], "neutral": r.feedback[0]},
        "accuracy": Percent(r.accuracy),
        "wall_s": round(r.wall_s, 1),
    }
    emit(ns, "simulate", fields)
    if r.failed:
        error("simulate", f"{r.failed} of {r.requests} requests failed (is the gateway at {url}?)")
    return 0 if r.failed == 0 else FAILED


def review(ns: argparse.Namespace) -> int:
    """flywheel review: export or import the human review queue."""
    from deployments.review_commands import run_review

    return run_review(ns)


def golden(ns: argparse.Namespace) -> int:
    """flywheel golden: propose golden items from traffic, or review them into a version."""
    from deployments.golden_commands import run_golden

    return run_golden(ns)


# ------------------------------------------------------------- stages 4-5 (weekly)


def train(ns: argparse.Namespace) -> int:
    """flywheel train: stage 4."""
    from flows.train import train as train_flow

    r = train_flow(method=ns.method, max_steps=ns.max_steps, workload=ns.workload)
    fields = {
        **({"workload": r.workload} if r.workload else {}),
        "status": r.status,
        "message": r.message,
        "version": r.version,
        "base_version": r.base_version,
        "method": r.method,
        "pairs": r.pairs,
        "golden_accuracy_base": percent_or_none(r.golden_accuracy_base),
        "golden_accuracy": percent_or_none(r.golden_accuracy),
    }
    emit(ns, "train", fields)
    return 0


def distil(ns: argparse.Namespace) -> int:
    """flywheel distil: a student of a workload's stable version."""
    from flows.distil import distil as distil_flow

    r = distil_flow(workload=ns.workload, student=ns.student, max_steps=ns.max_steps)
    fields = {
        **({"workload": r.workload} if r.workload else {}),
        "status": r.status,
        "message": r.message,
        "version": r.version,
        "teacher": r.teacher,
        "student_profile": r.student_profile,
        "accepted_answers": r.examples,
        "parameters": f"{r.student_parameters:,} of {r.teacher_parameters:,}"
        if r.student_parameters and r.teacher_parameters
        else None,
        "golden_accuracy_teacher": percent_or_none(r.teacher_accuracy),
        "golden_accuracy_student": percent_or_none(r.student_accuracy),
    }
    emit(ns, "distil", fields)
    return 0


def check_release(ns: argparse.Namespace) -> None:
    """The version must be servable: checked before a flow run starts (one line, routing
    untouched); the flow checks again for runs started from the UI."""
    from infra.errors import ControlRefused
    from infra.routing import open_routing
    from infra.runtime import Runtime
    from infra.serving.models import ServableVersions
    from tasks.release.machine.controls import retired_refusal

    rt = Runtime.from_env()
    ServableVersions.from_settings(rt.settings, rt.store).require(ns.version)
    if why := retired_refusal(open_routing(rt.settings, rt.store).load(), ns.version):
        raise ControlRefused(why)


def release(ns: argparse.Namespace) -> int:
    """flywheel release VERSION: stage 5."""
    from flows.release import ReleaseOptions
    from flows.release import release as release_flow

    margin = getattr(ns, "non_inferior", None)
    options = ReleaseOptions(
        force=ns.force,
        skip_shadow=ns.skip_shadow,
        workload=ns.workload,
        non_inferior=margin is not None,
        margin=margin if isinstance(margin, float) else None,
    )
    r = release_flow(ns.version, options)
    emit(ns, "release", release_fields(r))
    return 0 if r.outcome in ("promoted", "held", "stable") else 1


# ---------------------------------------------------------------------- the whole loop


def check_run(ns: argparse.Namespace) -> None:
    """``--cycles 0`` is for ``--distil`` alone, and ``--server vllm`` needs the vLLM
    environment (``make vllm``): refused before anything starts."""
    from infra.errors import ConfigError

    if ns.cycles == 0 and not getattr(ns, "distil", False):
        raise ConfigError("--cycles 0 runs nothing: it distils what is curated (add --distil)")
    if getattr(ns, "server", "local") == "vllm":
        from infra.serving.vllm_process import vllm_python

        vllm_python()


def run(ns: argparse.Namespace) -> int:
    """flywheel run: the whole loop."""
    from deployments.progress import showing_progress
    from flows.loop import LoopOptions, run_loop
    from tasks.demo.loop_summary import loop_report, not_promoted

    if getattr(ns, "scenario", None) == "drift":
        return _drift(ns)
    opts = LoopOptions(
        cycles=ns.cycles,
        seed=ns.seed,
        server=getattr(ns, "server", "local"),
        distil=getattr(ns, "distil", False),
    )
    if opts.server == "vllm":
        from tasks.demo.serving import LLAMA_METHOD

        opts.method = LLAMA_METHOD  # the Llama profile's measured recipe (tasks/demo/serving.py)
    if ns.requests is not None:
        opts.requests = ns.requests
    with showing_progress():
        summary = run_loop(opts)
    if ns.json:
        emit(ns, "run", asdict(summary))
    else:
        print(loop_report(summary))
    if reason := not_promoted(summary):
        error("run", reason)
        return FAILED
    return 0


def _drift(ns: argparse.Namespace) -> int:
    """flywheel run --scenario drift (tasks/demo/drift.py)."""
    from infra.settings import get_settings
    from tasks.demo.drift import run_drift

    home = get_settings().home_dir / "scenarios" / "drift"
    report = run_drift(home, seed=ns.seed, **({"requests": ns.requests} if ns.requests else {}))
    if ns.json:
        emit(ns, "run", asdict(report))
    else:
        print(report.text())
    shown = all(g.decision == "PROCEED_TO_SHADOW" for g in report.old_gates) and all(
        g.decision == "ROLLBACK" for g in report.new_gates
    )
    if not shown:
        error("run", "the drift scenario did not show the gate's miss and its repair")
        return FAILED
    return 0


def prove(ns: argparse.Namespace) -> int:
    """flywheel prove: the ablation."""
    from deployments.prove_command import run_prove

    return run_prove(ns)


# ------------------------------------------------------------------------- summaries


def release_fields(r: Any) -> dict[str, Any]:
    """The summary of a release run (a :class:`tasks.release.machine.outcome.ReleaseOutcome`)."""
    gate = r.gate or {}
    workload = {"workload": w} if (w := getattr(r, "workload", None)) else {}
    return workload | {
        "version": r.version,
        "outcome": r.outcome,
        "phase": r.phase,
        "reasons": r.reasons,
        "gate": gate.get("decision"),
        "reward_baseline": gate.get("mean_baseline"),
        "reward_candidate": gate.get("mean_candidate"),
        "p_value": gate.get("p_value"),
        "golden_items": gate.get("n"),
    }
