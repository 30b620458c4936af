"""``flywheel erasure-status RECEIPT`` (each store and model version an erasure touched, what
was done and when) and ``flywheel erasure-resolve RECEIPT [--workload W] --rollback|--accept
--reason TEXT`` (a person's choice when the replacement failed the gate, on its line)."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime
from typing import Any

from deployments.output import render

_RECEIPT = re.compile(r"^[0-9a-f]{64}$")


def receipt(value: str) -> str:
    """An erasure receipt: the 64 hex characters forget-user printed."""
    if not _RECEIPT.match(value):
        raise argparse.ArgumentTypeError(
            f"{value[:20]!r} is not a receipt (64 hex characters, as forget-user printed it)"
        )
    return value


def status_args(p: argparse.ArgumentParser) -> None:
    """Arguments of ``flywheel erasure-status``: the receipt."""
    p.add_argument("receipt", type=receipt, help="the receipt forget-user printed")


def resolve_args(p: argparse.ArgumentParser) -> None:
    """Arguments of ``flywheel erasure-resolve``: the receipt, the workload whose line the
    replacement failed on, ``--rollback`` or ``--accept``, and the reason."""
    p.add_argument("receipt", type=receipt, help="the receipt forget-user printed")
    p.add_argument(
        "--workload",
        default=None,
        help="the workload whose own line the replacement failed on (erasure-status names it)",
    )
    choice = p.add_mutually_exclusive_group(required=True)
    choice.add_argument(
        "--rollback",
        dest="action",
        action="store_const",
        const="rollback",
        help="make the newest version that never saw the user the stable one (on a workload's "
        "line: its own earlier version, else the shared stable)",
    )
    choice.add_argument(
        "--accept",
        dest="action",
        action="store_const",
        const="accept",
        help="accept the failed replacement's regression and make it the stable one",
    )
    p.add_argument("--reason", required=True, help="why (recorded in the audit log)")
    p.add_argument("--actor", default="cli", help="who acts (audited; default: cli)")


def status_fields(case: Any, at: datetime | None = None) -> dict[str, Any]:
    """The summary lines of a case: status and deadline, each store, each model version."""
    at = at or datetime.now(UTC)
    left = (case.deadline_at - at).total_seconds() / 86400
    due = f"deadline {case.deadline_at:%Y-%m-%d %H:%M} UTC"
    if case.status != "done":
        due += f", {left:.1f} days left" if left >= 0 else f", {-left:.1f} days OVERDUE"
    fields: dict[str, Any] = {
        "receipt": case.receipt,
        "status": f"{case.status} ({due})",
        "requested": f"{case.requested_at:%Y-%m-%d %H:%M:%S} UTC",
    }
    for name, counts in case.stores.items():
        if name == "langfuse":
            fields[name] = langfuse_line(counts)
        else:
            fields[name] = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items())
    if "langfuse" not in case.stores:
        fields["langfuse"] = "not used (traces in the object-store spool)"
    for version, entry in case.versions.items():
        when = f" {entry.at:%Y-%m-%d %H:%M} UTC" if entry.at else ""
        fields[version] = (
            f"{entry.role} when requested ({entry.evidence}); now {entry.status}{when}"
        )
    if not case.versions:
        fields["models"] = "no model version trained on this user's data"
    fields["replacement"] = case.replacement
    if case.status == "replacement_failed":
        lines = [w for w in case.failed_on if w != "default"] or [""]
        fields["action needed"] = "; ".join(
            f"flywheel erasure-resolve {case.receipt[:12]}...{f' --workload {w}' if w else ''} "
            "--rollback|--accept --reason TEXT"
            for w in lines
        )
    return fields


def models_fields(receipt: str) -> dict[str, Any]:
    """What forget-user adds to its summary: the model versions its data reached, each with its
    role then, and whether a replacement is pending (and by when)."""
    from infra.errors import ObjectNotFound
    from infra.runtime import Runtime
    from tasks.governance.reach import load_case

    try:
        case = load_case(Runtime.from_env().store, receipt)
    except ObjectNotFound:
        return {}
    models = {v: e.role for v, e in case.versions.items()} or "none trained on this user's data"
    status: str = case.status
    if status == "pending":
        status += f": replaced by the weekly run before {case.deadline_at:%Y-%m-%d} UTC"
    return {"models": models, "models_status": status}


def langfuse_line(counts: dict[str, Any]) -> str:
    """``requested N / confirmed M``: Langfuse queues deletes; only a read-back confirms."""
    requested, confirmed = int(counts.get("requested", 0)), int(counts.get("confirmed", 0))
    note = "" if confirmed >= requested else " (read-back pending)"
    return f"requested {requested} / confirmed {confirmed}{note}"


def step_lines(case: Any) -> list[str]:
    """One aligned line per step: when, what, on which store or version, detail."""
    rows = [(f"{s.at:%Y-%m-%d %H:%M:%S}", s.step, s.subject, s.detail) for s in case.steps]
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(3)]
    return [f"  {a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}" for a, b, c, d in rows]


def show_status(ns: argparse.Namespace) -> int:
    """``flywheel erasure-status RECEIPT``: the case's lines and its steps (or ``--json``)."""
    from infra.runtime import Runtime
    from tasks.governance.reach import case_json, load_case

    case = load_case(Runtime.from_env().store, ns.receipt)
    if getattr(ns, "json", False):
        body = case_json(case)
        body["langfuse"] = langfuse_line(case.stores.get("langfuse", {}))
        print(json.dumps({"command": ns.command, **body}))
        return 0
    print(render("erasure-status", status_fields(case)))
    print("steps")
    print("\n".join(step_lines(case)))
    return 0


def resolve(ns: argparse.Namespace) -> int:
    """``flywheel erasure-resolve RECEIPT [--workload W] --rollback|--accept --reason TEXT``:
    the case after the choice, with what was done first (which version serves which line)."""
    from flows.erasure_resolve import erasure_resolve as resolve_flow

    case = resolve_flow(ns.receipt, ns.action, ns.reason, ns.actor, ns.workload)
    done = next((s.detail for s in reversed(case.steps) if s.step.startswith("resolved")), "")
    if getattr(ns, "json", False):
        from tasks.governance.reach import case_json

        print(json.dumps({"command": ns.command, "resolved": done, **case_json(case)}))
    else:
        print(render("erasure-resolve", {"resolved": done, **status_fields(case)}))
    return 0
