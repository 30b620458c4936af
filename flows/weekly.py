"""The weekly flow (deployment ``train-and-release``): train and release a candidate for every
workload with enough new data, each workload's train and release their own flow runs named by
the workload, so the Prefect UI shows one release run per workload; or, while an erasure
waits, the erasure replacement instead."""

from __future__ import annotations

from typing import Any, cast

from prefect import flow, get_run_logger
from prefect.utilities.annotations import quote

from flows.erasure import replace_erased
from flows.release import ReleaseOptions, release
from flows.train import train
from infra.flow_docs import described
from infra.parameters import OverrideReason, TrainMethod
from infra.runtime import Runtime
from infra.traces.conversation import DEFAULT_WORKLOAD
from tasks.governance.reach import erasure_pending
from tasks.train.privacy import check_training_privacy_task
from tasks.train.readiness import WorkloadCounts, count_by_workload_task
from tasks.train.weekly import WorkloadRun, skipped_runs, weekly_summary


def release_run_name(workload: str, version: str) -> str:
    """The flow run name of ``workload``'s release of ``version`` in the Prefect UI."""
    return f"release-{workload}-{version}"


@described
@flow(name="train-and-release", log_prints=False)
def weekly(
    method: TrainMethod | None = None, privacy_override: OverrideReason | None = None
) -> dict[str, object]:
    """Weekly: for every workload with enough new curated traffic (at least
    FLYWHEEL_TRAIN__MIN_PAIRS examples in its buffer), preference-tune its candidate on its
    own rows and release it on its own line (golden gate on its golden set -> shadow ->
    canary -> promote, or roll back), each release a flow run named release-<workload>-
    <version>; one workload held, rolled back or failing changes no other. Workloads with too
    little data are listed as skipped with their count. Traffic naming no workload (or one
    FLYWHEEL_WORKLOADS does not list) is the shared release's: it trains and releases the
    shared version as one run. While a forget-user request waits for its models
    (a serving version trained on the user's data), this week's run is the erasure
    replacement instead: every pending erasure batched into one retrain per reached release
    line of its stable version's recipe without the erased rows, released the same way.
    Otherwise it does not train when the last day's curate runs let canary values through
    anonymisation (recall below FLYWHEEL_CURATE__CANARY_MIN_RECALL): the run fails saying
    which types, unless a privacy override gives the reason to train anyway (audited).

    Args:
        method: Training method: dpo, rft or grpo, or auto to pick by data size. Empty:
            FLYWHEEL_TRAIN__METHOD.
        privacy_override: Why to train although the last day's canary recall is below the
            bar (recorded in the audit log). Empty: such a day is not trained on.
    """
    rt = Runtime.from_env()
    if erasure_pending(rt.store):
        return {"train": None, "release": None, "erasure": replace_erased()}
    privacy = check_training_privacy_task(
        rt.catalog, min_recall=rt.settings.curate.canary_min_recall, override=privacy_override
    )
    get_run_logger().info(privacy)
    counts = count_by_workload_task(rt.catalog, cast(Any, quote(rt.settings)))
    if not counts.labelled():  # one shared release, as before workloads existed
        trained = train(method=method)
        if trained.status != "trained" or not trained.version:
            return {"train": trained, "release": None}
        return {"train": trained, "release": release(trained.version)}
    runs = [_workload_week(w, counts, method) for w in counts.ready()]
    runs += skipped_runs(counts)
    weekly_summary(runs)
    return {"workloads": {r.workload: r for r in runs}}


def _workload_week(workload: str, counts: WorkloadCounts, method: str | None) -> WorkloadRun:
    """Train and release ``workload``'s candidate; an error ends this workload's week only."""
    run = WorkloadRun(workload=workload, examples=counts.counts[workload], outcome="skipped")
    try:
        trained = train.with_options(flow_run_name=f"train-{workload}")(
            method=cast(Any, method), workload=workload
        )
        run.train, run.message = trained, trained.message
        if trained.status != "trained" or not trained.version:
            return run
        line = None if workload == DEFAULT_WORKLOAD else workload
        released = release.with_options(flow_run_name=release_run_name(workload, trained.version))(
            trained.version, ReleaseOptions(workload=line)
        )
        run.release, run.outcome = released, released.outcome
        run.message = "; ".join(released.reasons) or released.outcome
    except Exception as exc:  # noqa: BLE001 - one workload's failure must not stop the others
        run.outcome, run.message = "failed", f"{type(exc).__name__}: {exc}"
        get_run_logger().warning("weekly: workload %s failed: %s", workload, type(exc).__name__)
    return run
