"""A person's review of the golden proposals (:mod:`tasks.golden_proposals`) and the new golden
version published from it.

``flywheel golden review FILE`` (:func:`review`): each line's ``decision`` is ``accept``,
``edit`` (the line's ``question`` / ``reference`` as the person changed them) or ``reject``;
the decisions are stored, and the accepted and edited items become a new golden version
(:func:`publish`): a file ``proposed-<UTC time>.jsonl`` added to ``golden/<workload>/`` (a
workload gated on the shared set gets a folder of its own, the shared files copied into it),
its ``MANIFEST`` rewritten and a line appended to its ``HISTORY``. Earlier files are never
changed, so every earlier version is the set of files its ``HISTORY`` line lists. From then on
the train stage decontaminates against the new items too, and the gate decides on the new
version and names it in its report.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Required, TypedDict, cast

from infra.errors import ReviewFileError
from infra.traces.conversation import Messages
from tasks.golden import (
    GOLDEN_DIR,
    GoldenItem,
    golden_version,
    load_golden,
    own_golden_path,
    write_manifest,
)
from tasks.golden_proposals import TABLE, ProposalRow

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from infra.runtime import Runtime
    from infra.settings import RewardSettings

HISTORY = "HISTORY"
DECISIONS = ("accept", "edit", "reject")


class Decision(TypedDict, total=False):
    """One line of a review file: a proposal and the person's decision (empty: undecided); an
    edit's ``question`` and ``reference`` as they changed them."""

    proposal_id: Required[str]
    decision: Required[str]  # accept | edit | reject | "" (undecided)
    question: str
    reference: str


@dataclass
class Reviewed:
    """What one ``golden review`` did."""

    accepted: int
    edited: int
    rejected: int
    undecided: int
    workload: str | None
    golden_version: str | None  # the new version (None: nothing accepted)
    path: str | None
    items: int  # the new version's items


def parse_decisions(text: str) -> list[Decision]:
    """The review file's lines, each checked (a known proposal id comes later).

    Raises:
        ReviewFileError: a line is not JSON, or its decision is not accept / edit / reject.
    """
    out: list[Decision] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReviewFileError(f"line {n}: not JSON ({exc.msg})") from None
        decision = str(data.get("decision") or "").strip().lower()
        if decision and decision not in DECISIONS:
            raise ReviewFileError(
                f"line {n}: decision {decision!r} is not one of {', '.join(DECISIONS)}"
            )
        if not data.get("proposal_id"):
            raise ReviewFileError(f"line {n}: no proposal_id")
        # the file's edge, checked above: a proposal id and a known decision (or none)
        out.append(cast("Decision", {**data, "decision": decision}))
    return out


def _one_workload(decided: list[Decision], queued: dict[str, ProposalRow]) -> set[str]:
    """The workload of the decided proposals, each pending in the queue, all of one workload.

    Raises:
        ReviewFileError: a proposal not in the queue, already decided, or of another workload.
    """
    for d in decided:
        row = queued.get(d["proposal_id"])
        if row is None:
            raise ReviewFileError(
                f"proposal {d['proposal_id']} is not in the queue (flywheel golden propose)"
            )
        if row["status"] != "pending":
            raise ReviewFileError(f"proposal {d['proposal_id']} was already {row['status']}")
    workloads = {queued[d["proposal_id"]]["workload"] for d in decided}
    if len(workloads) > 1:
        raise ReviewFileError(f"one workload per review file, not {sorted(workloads)}")
    return workloads


def _decided_row(d: Decision, queued: ProposalRow, *, reviewer: str, at: datetime) -> ProposalRow:
    """The proposal's row with its decision (an edit's question and reference) and reviewer.

    Raises:
        ReviewFileError: an edit that empties the question or the reference.
    """
    row = queued.copy()
    if d["decision"] == "edit":
        row["question"] = str(d.get("question") or "").strip()
        row["reference"] = str(d.get("reference") or "").strip()
        if not row["question"] or not row["reference"]:
            raise ReviewFileError(
                f"proposal {d['proposal_id']}: an edit needs a question and a reference"
            )
    row["status"] = {"accept": "accepted", "edit": "edited", "reject": "rejected"}[d["decision"]]
    row["reviewer"], row["decided_at"] = reviewer, at
    return row


def review(rt: Runtime, text: str, *, reviewer: str = "cli") -> Reviewed:
    """Store the decisions of a review file and publish the accepted and edited items as a new
    golden version of their workload.

    Raises:
        ReviewFileError: a bad line, an unknown or already decided proposal, proposals of
            several workloads in one file, or an edit that empties the question or reference.
    """
    from pyiceberg.expressions import In

    from infra.catalog import replace_where, scan

    decisions = parse_decisions(text)
    ids = [d["proposal_id"] for d in decisions]
    queued: dict[str, ProposalRow] = {
        r["proposal_id"]: r
        for r in scan(rt.catalog, TABLE, In("proposal_id", ids) if ids else None).to_pylist()
    }
    decided = [d for d in decisions if d["decision"]]
    workloads = _one_workload(decided, queued)
    now = datetime.now(UTC)
    rows = [_decided_row(d, queued[d["proposal_id"]], reviewer=reviewer, at=now) for d in decided]
    items = [_item(row) for row in rows if row["status"] != "rejected"]
    workload = next(iter(workloads), None)
    path = version = None
    count = 0
    if items and workload is not None:
        folder, version, count = publish(
            rt.settings.reward, workload, items, workloads=rt.settings.workloads
        )
        path = str(folder)
        for row in rows:
            if row["status"] != "rejected":
                row["new_version"] = version
    if rows:
        replace_where(rt.catalog, TABLE, In("proposal_id", [r["proposal_id"] for r in rows]), rows)
    return Reviewed(
        accepted=sum(r["status"] == "accepted" for r in rows),
        edited=sum(r["status"] == "edited" for r in rows),
        rejected=sum(r["status"] == "rejected" for r in rows),
        undecided=len(decisions) - len(decided),
        workload=workload,
        golden_version=version,
        path=path,
        items=count,
    )


def _item(row: ProposalRow) -> GoldenItem:
    """A golden item from a reviewed proposal (its conversation as curate wrote it, the last
    user turn replaced by an edited question)."""
    raw = row.get("messages")
    messages: Messages = json.loads(raw) if raw else []
    if messages:  # the question as reviewed (an edit changes it)
        for m in reversed(messages):
            if m.get("role") == "user":
                m["content"] = row["question"]
                break
    return GoldenItem(
        item_id=str(row["proposal_id"]),
        question=str(row["question"]),
        contexts=list(row.get("contexts") or []),
        reference=str(row["reference"]),
        slice="proposed",
        workload=str(row["workload"]),
        messages=messages,
        extra={"source": "golden propose", "reason": row.get("reason")},
    )


def publish(
    reward: RewardSettings,
    workload: str,
    items: Sequence[GoldenItem],
    *,
    workloads: Collection[str] = (),
    at: datetime | None = None,
) -> tuple[Path, str, int]:
    """Add ``items`` to ``workload``'s golden set as a new version (see module); returns the
    folder, the new version and its number of items.

    Raises:
        ReviewFileError: the workload's set is a single file (add the items to it by hand),
            or an item id is already in the set.
    """
    at = at or datetime.now(UTC)
    own = own_golden_path(reward, workload, workloads=workloads)
    if own is not None and own.is_file():
        raise ReviewFileError(
            f"{workload}'s golden set is the file {own}: add the items to it yourself"
        )
    if (
        own is None
    ):  # gated on the shared set until now: a folder of its own, the shared files in it
        shared = Path(reward.golden).expanduser() if reward.golden else GOLDEN_DIR
        if shared.is_file():
            raise ReviewFileError(f"the shared golden set is the file {shared}: name a folder")
        own = shared / workload
        own.mkdir(parents=True, exist_ok=True)
        for f in sorted(shared.glob("*.jsonl")):
            shutil.copy2(f, own / f.name)
        write_manifest(own)
        _history(own, at, note=f"copied from the shared set {golden_version(shared)}")
    existing = {it.item_id for it in load_golden(own, workload=workload)}
    if clash := sorted(existing & {it.item_id for it in items}):
        raise ReviewFileError(f"already golden: {clash[:5]}")
    name = f"proposed-{at:%Y%m%dT%H%M%S}.jsonl"
    (own / name).write_text(
        "".join(json.dumps(it.to_json(), sort_keys=True) + "\n" for it in items)
    )
    write_manifest(own)
    version = _history(own, at, note=f"{len(items)} item(s) added in {name}")
    return own, version, len(load_golden(own, workload=workload))


def _history(folder: Path, at: datetime, *, note: str) -> str:
    """Append the folder's current version, its files and ``note`` to ``HISTORY``."""
    version = golden_version(folder)
    files = " ".join(p.name for p in sorted(folder.glob("*.jsonl")))
    with (folder / HISTORY).open("a") as f:
        f.write(f"{at:%Y-%m-%dT%H:%M:%SZ}  {version}  {files}  # {note}\n")
    return version
