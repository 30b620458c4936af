"""Erasure reaching the models: ``erasure-replacement`` (run by the weekly flow while an
erasure is open); the case a forget-user opens is
:func:`tasks.governance.erasure_steps.open_case`, a person's choice when a replacement failed
is ``erasure-resolve`` (:mod:`flows.erasure_resolve`)."""

from __future__ import annotations

from prefect import flow

from flows.release import release
from infra.flow_docs import described
from infra.parameters import Steps
from infra.routing import open_routing
from infra.runtime import Runtime
from tasks.distil.replace import redistil
from tasks.governance.erasure_steps import ReplacementResult
from tasks.governance.reach import open_cases, publish_gauges
from tasks.governance.replace_lines import replace_reached


@described
@flow(name="erasure-replacement", log_prints=False)
def replace_erased(max_steps: Steps | None = None) -> ReplacementResult:
    """Replace every model version that trained on a forgotten user's data, before the
    deadline (FLYWHEEL_ERASURE__DEADLINE_DAYS after forget-user). All open erasures are
    batched: on each release line whose stable version saw an erased user (the shared line,
    or a workload's own), that version's recipe is trained again on its reproducible training
    set (its workload's rows, from its base) minus the erased rows, gated and released on
    that line like any candidate, as a run named release-erasure-<workload>-<version>; once
    every replacement is promoted, every version that saw an erased user and no line serves
    is retired (never routed or released again); other workloads' lines are left alone. A
    replacement that fails the gate changes nothing more: the alert fires and a person
    chooses (`flywheel erasure-resolve RECEIPT --rollback|--accept`).

    Args:
        max_steps: Stop training after this many optimizer steps. Empty: the recipe's.
    """
    rt = Runtime.from_env()
    routing = open_routing(rt.settings, rt.store, catalog=rt.catalog)
    cases = open_cases(rt.store)
    try:
        if not any(c.status == "pending" for c in cases):
            return ReplacementResult(status="none", message="no erasure waits for a replacement")
        return replace_reached(rt, routing, cases, max_steps, release=release, redistil=redistil)
    finally:
        publish_gauges(rt)
