"""Stage 4 flow: ``train``."""

from __future__ import annotations

import uuid

from prefect import flow
from prefect.runtime import flow_run

from infra.flow_docs import described
from infra.parameters import ModelVersion, Steps, TrainMethod, Workload
from infra.runtime import Runtime
from infra.settings.workloads import configured_workload
from tasks.train.run import (
    TrainRunResult,
    plan_run,
    publish_train,
    report_selection,
    run_config,
    skipped_result,
    train_selection,
)


@described
@flow(name="train", log_prints=False)
def train(
    method: TrainMethod | None = None,
    max_steps: Steps | None = None,
    base_version: ModelVersion | None = None,
    workload: Workload | None = None,
) -> TrainRunResult:
    """Preference-tune the serving model on curated traffic and publish a candidate version.

    Builds preference pairs from the last windows of flywheel.training_examples (best vs worst
    answer of each prompt, golden questions excluded), trains with DPO (or RFT / GRPO; "auto"
    picks by data size and says why), and publishes models/<next version>/ with a model card
    and lineage (data snapshots, reward config, PII settings, metrics, golden accuracy). With
    too few pairs the run ends "skipped" with the count. Leave the fields empty for the
    settings' defaults; base version defaults to the stable one. With a workload (one
    FLYWHEEL_WORKLOADS lists), only its rows are read (default: those recorded under no
    workload, "default" or one that is not configured), the
    base is that workload's stable version (its own once it promoted one, else the shared
    stable), the golden evaluation uses its golden set, and the lineage names it.

    Args:
        method: dpo, rft or grpo, or auto to pick by data size (the run says why). Empty:
            FLYWHEEL_TRAIN__METHOD.
        max_steps: Stop training after this many optimizer steps. Empty:
            FLYWHEEL_TRAIN__MAX_STEPS.
        base_version: The model version to tune, e.g. v2. Empty: the stable version.
        workload: Train on this workload's rows only, e.g. support. Empty: every workload.
    """
    rt = Runtime.from_env()
    configured_workload(workload, rt.settings.workloads)  # before anything is read or written
    run_id = str(flow_run.id or uuid.uuid4())  # train_run: links pairs and lineage to this run
    with rt.reporting("train") as report:
        run = plan_run(rt, run_id, base_version=base_version, method=method, workload=workload)
        report_selection(report, run.selection)
        if run.choice.method is None:
            result = skipped_result(rt, run)
        else:
            config = run_config(rt, run, max_steps=max_steps)
            result = train_selection(rt, report, run, config)
    publish_train(result, run_id)
    return result
