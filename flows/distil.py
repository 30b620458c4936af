"""Distillation flow: ``distil`` (a smaller student of a workload's stable version)."""

from __future__ import annotations

from prefect import flow, get_run_logger

from infra.flow_docs import described
from infra.parameters import Steps, Workload
from infra.runtime import Runtime
from infra.settings.workloads import configured_workload
from tasks.distil.publish import distil_and_publish, record_result, report_accuracy
from tasks.distil.run import DistilResult, plan_distil, skipped


@described
@flow(name="distil", log_prints=False)
def distil(
    workload: Workload | None = None,
    student: str | None = None,
    max_steps: Steps | None = None,
) -> DistilResult:
    """Distil a workload's stable version (the teacher) into a smaller student model.

    Reads the workload's accepted traffic from flywheel.training_examples (train-eligible,
    high-reward answers its verifier passed, golden questions excluded, consent applied),
    trains a student of the profile on each conversation exactly as served, with the
    teacher's next-token distribution as a second target (KL), evaluates both on the
    workload's golden set, and publishes the student as the next model version with a model
    card naming the teacher, the traffic windows and the profile. Release it with
    `flywheel release VERSION --workload W --non-inferior MARGIN`.

    Args:
        workload: The workload whose traffic and golden set are used, e.g. calculator.
            Empty: the shared release's.
        student: A student profile of FLYWHEEL_DISTIL__STUDENTS. Empty: the default.
        max_steps: Optimizer steps. Empty: FLYWHEEL_DISTIL__STEPS.
    """
    rt = Runtime.from_env()
    configured_workload(workload, rt.settings.workloads)
    with rt.reporting("distil") as report:
        plan = plan_distil(rt, workload=workload, student=student)
        report.records("in", plan.selection.counts.get("read", 0))
        report.records("out", len(plan.selection.sft))
        need = rt.settings.distil.min_examples
        if len(plan.selection.sft) < need:
            result = skipped(plan, f"skipped: {len(plan.selection.sft)} accepted answers < {need}")
        else:
            result = distil_and_publish(rt, plan, max_steps=max_steps)
            report_accuracy(report, result)
    record_result(rt, plan, result)
    get_run_logger().info("distil: %s", result.message)
    return result
