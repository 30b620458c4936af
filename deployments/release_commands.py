"""The release controls of ``flywheel``: status, promote, pause, resume, abort, rollback, and
the gate report of a version. Each handler takes the parsed arguments and returns the exit
code; flows and tasks are imported inside, so ``flywheel --help`` stays fast."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Literal

from deployments.output import emit, render

Action = Literal["promote", "pause", "resume", "abort"]


def status(ns: argparse.Namespace) -> int:
    """flywheel status: the routing state, and a line per workload once any has a release of
    its own (``--json``: ``workloads``, the shared one first)."""
    from infra.gateway.stable import unservable_stable
    from infra.routing import open_routing
    from infra.runtime import Runtime
    from tasks.release.machine.controls import release_status

    rt = Runtime.from_env()
    routing = open_routing(rt.settings, rt.store)
    fields = release_status(routing, bake_s=rt.settings.model_server.bake_s)
    if why := unservable_stable(rt.settings, rt.store, str(fields.get("stable"))):
        fields = {**fields, "warning": why}
    fields |= cost_fields(rt, fields["workloads"])
    if getattr(ns, "json", False):
        emit(ns, "status", fields)
        return 0
    rows = fields.pop("workloads")
    emit(ns, "status", fields)
    if len(rows) > 1:  # a line per workload once any has a release of its own
        print(render("workloads", {row["workload"] or "(shared)": row_text(row) for row in rows}))
    return 0


def cost_fields(rt: Any, rows: list[dict[str, Any]]) -> dict[str, str]:
    """Cost per 1,000 requests of each line's stable and candidate over the last
    ``FLYWHEEL_COST__WINDOW_S`` (embedded: since the gateway started), as the gateway measured
    it (:mod:`infra.metrics.cost`); nothing when no gateway or Prometheus is configured."""
    import time

    from infra.errors import MetricsError
    from infra.metrics.cost import describe
    from infra.metrics.cost_readers import open_cost_reader

    admin_url, token = rt.settings.gateway.metrics_source()
    reader = open_cost_reader(
        prometheus_url=rt.settings.release.prometheus_url, admin_url=admin_url, admin_token=token
    )
    if reader is None:
        return {}
    since, out = time.time() - rt.settings.cost.window_s, {}
    for row in rows:
        for role in ("stable", "candidate"):
            if not (version := row.get(role)):
                continue
            try:
                stats = reader.read_cost(version, since=since, workload=row["workload"])
            except MetricsError as exc:
                return {"cost": f"unavailable: {exc}"}
            stats.price_per_1k_tokens = rt.settings.cost.price(version)
            line = f" ({row['workload']})" if row["workload"] else ""
            out[f"cost {role} {version}{line}"] = describe(stats)
    return out


def row_text(row: dict[str, Any]) -> str:
    """One workload's release on one line: stable, candidate, phase and weight."""
    weight = f"{row['weight']:g}%"
    return (
        f"stable {row['stable']}, candidate {row['candidate'] or '-'}, "
        f"phase {row['phase']}, weight {weight}"
    )


def check_promote(ns: argparse.Namespace) -> None:
    """A promotion needs a servable candidate that passed the gate (or --force with a reason):
    checked before a flow run starts; the flow checks again."""
    from infra.errors import ControlRefused
    from infra.routing import open_routing
    from infra.runtime import Runtime
    from infra.serving.models import ServableVersions
    from tasks.release.machine.controls import promotion_refusal

    if ns.force and not (ns.reason or "").strip():
        raise ControlRefused("promote --force needs --reason TEXT (recorded in the audit log)")
    rt = Runtime.from_env()
    versions = ServableVersions.from_settings(rt.settings, rt.store)
    state = open_routing(rt.settings, rt.store).load().release_of(ns.workload)
    reason = ns.reason or "manual"
    if why := promotion_refusal(state, versions=versions, force=ns.force, reason=reason):
        raise ControlRefused(why)


def promote(ns: argparse.Namespace) -> int:
    """flywheel promote."""
    ns.reason = ns.reason or "manual"
    return _control("promote", ns, force=ns.force)


def pause(ns: argparse.Namespace) -> int:
    """flywheel pause."""
    return _control("pause", ns)


def check_resume(ns: argparse.Namespace) -> None:
    """Resuming routes traffic to the candidate again: it must be servable (checked before a
    flow run starts; the flow checks again)."""
    from infra.routing import open_routing
    from infra.runtime import Runtime
    from infra.serving.models import ServableVersions

    rt = Runtime.from_env()
    state = open_routing(rt.settings, rt.store).load().release_of(ns.workload)
    if (candidate := state.candidate) is not None:
        ServableVersions.from_settings(rt.settings, rt.store).require(candidate)


def resume(ns: argparse.Namespace) -> int:
    """flywheel resume."""
    return _control("resume", ns)


def abort(ns: argparse.Namespace) -> int:
    """flywheel abort."""
    return _control("abort", ns)


def _control(action: Action, ns: argparse.Namespace, *, force: bool = False) -> int:
    from flows.release_control import release_control

    state = release_control(
        action, reason=ns.reason, actor=ns.actor, force=force, workload=ns.workload
    )
    emit(ns, action, workload_field(ns) | state_fields(state))
    return 0


def rollback(ns: argparse.Namespace) -> int:
    """flywheel rollback: the candidate out of traffic at once."""
    from flows.rollback import rollback as rollback_flow

    result = rollback_flow(reason=ns.reason, actor=ns.actor, workload=ns.workload)
    if result.get("restored_stable"):
        print(
            f"rollback: the stable version {result['unservable_stable']} cannot be served; "
            f"{result['restored_stable']} is the stable version again",
            file=sys.stderr,
        )
    fields = {k: result.get(k) for k in ("rolled_back", "version", "via")}
    if result.get("restored_stable"):
        fields["restored_stable"] = result["restored_stable"]
    emit(ns, "rollback", workload_field(ns) | fields | state_fields(result))
    return 0


def workload_field(ns: argparse.Namespace) -> dict[str, Any]:
    """``{"workload": W}`` when the command named one (``--workload``), else nothing."""
    return {"workload": ns.workload} if getattr(ns, "workload", None) else {}


def state_fields(found: dict[str, Any]) -> dict[str, Any]:
    """Stable, candidate, phase and weight of a routing state (or of ``found["state"]``)."""
    state = found.get("state", found)
    return {k: state.get(k) for k in ("stable", "candidate", "phase", "weight")}


def report(ns: argparse.Namespace) -> int:
    """Print a version's last gate report (``gates/<version>/report.md``; ``--json``: the
    whole ``report.json`` with every item's scores)."""
    from infra.errors import ControlRefused, ObjectNotFound
    from infra.keys import gate_prefix
    from infra.settings import get_settings
    from infra.store import open_store
    from tasks.release.gate.report import read_report

    if ns.version == "agreement":
        return agreement(ns)
    store = open_store(get_settings())
    try:
        data = read_report(store, ns.version)
        markdown = store.get(gate_prefix(ns.version) + "report.md").decode()
    except ObjectNotFound:
        raise ControlRefused(
            f"no gate report for {ns.version}: the golden gate has not run on it "
            f"(flywheel release {ns.version})"
        ) from None
    if ns.json:
        emit(ns, "report", data)
    else:
        print(markdown)
    return 0


def agreement(ns: argparse.Namespace) -> int:
    """flywheel report agreement: every release that reached the canary (of ``--workload``),
    the gate's offline estimate beside the canary's online outcome, their sign agreement and
    rank correlation, and the plot (``--plot``); the verifier's pass rates of canaries scored
    since are filled in first."""
    from pathlib import Path

    from infra.runtime import Runtime
    from tasks.release.gate.agreement import read_outcomes, refresh_verifier
    from tasks.release.gate.agreement_report import agreement as summarize
    from tasks.release.gate.agreement_report import agreement_plot, agreement_text, json_rows

    rt = Runtime.from_env()
    rows = read_outcomes(rt.catalog, ns.workload)
    if refresh_verifier(rt.catalog, rt.store, rows):
        rows = read_outcomes(rt.catalog, ns.workload)
    summary = summarize(rows)
    plot = Path(ns.plot) if ns.plot else rt.settings.home_dir / "reports" / "agreement.png"
    plot.parent.mkdir(parents=True, exist_ok=True)
    written = agreement_plot(rows, str(plot)) if rows else None
    if getattr(ns, "json", False):
        emit(ns, "agreement", {**summary, "plot": written, "rows": json_rows(rows)})
        return 0
    if not rows:
        print("no release has reached the canary yet: no release_outcomes rows")
        return 0
    print(agreement_text(rows, summary))
    print(
        f"plot: {written}"
        if written
        else "plot: not written (matplotlib is not installed in this environment)"
    )
    return 0
