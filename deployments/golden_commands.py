"""``flywheel golden propose`` / ``flywheel golden review``: a golden set that follows traffic
(:mod:`tasks.golden_proposals`, :mod:`tasks.golden_review`). Proposals go to a JSONL file a
person fills in (``decision``: accept, edit or reject); reviewing it publishes the accepted items
as a new golden version."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from deployments.argtypes import workload
from deployments.output import emit
from deployments.review_commands import read_review_file


def golden_args(p: argparse.ArgumentParser) -> None:
    """The arguments of flywheel golden."""
    p.add_argument(
        "action",
        choices=("propose", "review"),
        help="propose: new items from curated traffic the golden set does not cover; review: "
        "read a filled-in proposals file and publish the accepted items as a new version",
    )
    p.add_argument(
        "file",
        nargs="?",
        default=None,
        help="propose: where the proposals go (default: $FLYWHEEL_HOME/golden-proposals-W.jsonl); "
        "review: the filled-in file",
    )
    p.add_argument(
        "--workload",
        type=workload,
        default="default",
        metavar="W",
        help="propose: the workload whose golden set to extend (default: default)",
    )
    p.add_argument(
        "--reviewer", default="cli", help="review: who decided (a pseudonym; stored with each)"
    )


def check_golden(ns: argparse.Namespace) -> None:
    """Refuse a review without its file, before anything starts."""
    if ns.action == "review" and not ns.file:
        raise ValueError("golden review needs the filled-in FILE")


def run_golden(ns: argparse.Namespace) -> int:
    """flywheel golden propose|review."""
    from infra.runtime import Runtime

    rt = Runtime.from_env()
    if ns.action == "propose":
        return _propose(ns, rt)
    return _review(ns, rt)


def _propose(ns: argparse.Namespace, rt: Any) -> int:
    from tasks.golden_proposals import export, pending, propose

    found = propose(rt, ns.workload)
    path = (
        Path(ns.file) if ns.file else rt.settings.home_dir / f"golden-proposals-{ns.workload}.jsonl"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    queued = pending(rt.catalog, ns.workload)
    path.write_text(
        export(sorted(queued, key=lambda r: (r["cluster"], r["question"]))), encoding="utf-8"
    )
    fields: dict[str, Any] = {
        "workload": found.workload,
        "golden_version": found.golden_version,
        "curated_prompts": found.prompts,
        "coverage_of_curated": f"{found.coverage:.0%}",
        "uncovered_clusters": found.clusters,
        "proposed": len(found.proposals),
        "refused": found.refused or "none",
        "file": str(path),
    }
    for p in found.proposals[:5]:
        fields[f"e.g. {p.proposal_id}"] = f"{p.question!r} -> {p.reference!r}"
    fields["next"] = (
        f"fill in each line's decision (accept / edit / reject), then: flywheel golden review {path}"
    )
    emit(ns, "golden propose", fields)
    return 0


def _review(ns: argparse.Namespace, rt: Any) -> int:
    from dataclasses import asdict

    from infra.audit import record_event
    from tasks.golden_review import review

    text = read_review_file(ns.file)
    done = review(rt, text, reviewer=ns.reviewer)
    if done.golden_version:
        record_event(
            rt.catalog,
            event_type="golden_version",
            actor=ns.reviewer,
            subject=str(done.workload),
            details=asdict(done),
        )
    emit(ns, "golden review", asdict(done))
    return 0
