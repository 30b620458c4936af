"""``flywheel review export`` / ``flywheel review import``: the embedded human-review queue as a
CSV or JSONL file a person fills in (``human_score`` 0..1, ``reviewer`` a pseudonym)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from deployments.output import emit


def review_args(p: argparse.ArgumentParser) -> None:
    """The arguments of flywheel review."""
    p.add_argument("action", choices=("export", "import"), help="write the queue / read labels")
    p.add_argument(
        "file",
        nargs="?",
        default=None,
        help="export: where to write (default: stdout); import: the filled-in file",
    )
    p.add_argument(
        "--format",
        choices=("csv", "jsonl"),
        default=None,
        help="default: from the file name (.jsonl / .json: jsonl), else csv",
    )
    p.add_argument("--all", action="store_true", help="export: labelled items too")


def check_review(ns: argparse.Namespace) -> None:
    """Refuse a review file that cannot be read or written, before anything starts."""
    if ns.action == "import" and not ns.file:
        raise ValueError("review import needs the filled-in FILE")


def _format(ns: argparse.Namespace) -> str:
    if ns.format:
        return str(ns.format)
    return "jsonl" if ns.file and Path(ns.file).suffix.lower() in (".jsonl", ".json") else "csv"


def run_review(ns: argparse.Namespace) -> int:
    """flywheel review export|import FILE."""
    from infra.runtime import Runtime

    rt = Runtime.from_env()
    if ns.action == "export":
        return _export(ns, rt)
    return _import(ns, rt)


def _export(ns: argparse.Namespace, rt: Any) -> int:
    from tasks.review import export_items, pending_items

    items = pending_items(rt.catalog, include_labelled=ns.all)
    text = export_items(items, fmt=_format(ns))
    if ns.file is None:
        sys.stdout.write(text)
        return 0
    Path(ns.file).write_text(text, encoding="utf-8")
    fields: dict[str, Any] = {"items": len(items), "file": ns.file, "format": _format(ns)}
    if not items:
        fields["note"] = "the review queue is empty (curate fills it)"
    emit(ns, "review export", fields)
    return 0


def _import(ns: argparse.Namespace, rt: Any) -> int:
    from infra.audit import record_event
    from tasks.review import parse_labels, pending_items, store_labels, weekly_correlation

    text = read_review_file(ns.file)
    labels, blank = parse_labels(text, fmt=_format(ns))
    stored = store_labels(rt.catalog, labels)
    weeks = weekly_correlation(pending_items(rt.catalog, include_labelled=True))
    latest = weeks[-1] if weeks else None
    with rt.reporting("review") as report:
        report.records("in", stored)
        if latest is not None:
            report.gauge("flywheel_reward_human_samples", latest.samples)
            if latest.spearman is not None:
                report.gauge("flywheel_reward_human_spearman", latest.spearman)
    details = {"labels": stored, "unlabelled": blank, "weeks": [w.__dict__ for w in weeks[-4:]]}
    record_event(
        rt.catalog, event_type="review.import", actor="cli", subject="review_queue", details=details
    )
    fields: dict[str, Any] = {"labels": stored, "unlabelled": blank}
    if latest is not None:
        fields["week"] = latest.week
        fields["samples"] = latest.samples
        fields["spearman"] = None if latest.spearman is None else round(latest.spearman, 3)
        if latest.spearman is not None and latest.spearman < 0.7:
            fields["note"] = "reward-human correlation below 0.7: revisit the reward"
    emit(ns, "review import", fields)
    return 0


def read_review_file(path: str) -> str:
    """The text of the file a person filled in (UTF-8); raises ``ReviewFileError`` with one
    clear line when it cannot be read."""
    from infra.errors import ReviewFileError

    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReviewFileError(f"cannot read {path}: {exc}") from None
