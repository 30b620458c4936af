"""A golden set that follows traffic: proposals from curated traffic in the clusters the golden
set does not cover, a person's review, and a new golden version from the accepted items.

``flywheel golden propose --workload W`` (:func:`propose`):

1. reads W's rows of ``flywheel.training_examples`` (curate's output: anonymised, k-anonymous;
   nothing else is read, so a proposal never carries text the anonymiser saw less of than
   curate asks) and measures them against W's golden set (:mod:`tasks.golden_coverage`);
2. in each uncovered cluster, one candidate per distinct question (normalised as the train
   stage's decontamination does: placeholders, case, spacing and punctuation ignored), its
   reference the answer the verifier passed with the highest reward, else the best-scored
   answer, with the reason it was chosen;
3. refuses a candidate near training data: its question is, or ends with, the question of a
   row a model version trained on (every version's ``lineage.json``; the train stage's
   :class:`~tasks.train.pairs.GoldenFilter`, turned around), or one of the golden set's own;
4. queues the rest in ``flywheel.golden_proposals`` (status ``pending``, replacing W's earlier
   pending ones) and writes them to a JSONL file a person fills in.

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

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.errors import ObjectNotFound, ReviewFileError
from tasks.golden import (
    GOLDEN_DIR,
    GoldenItem,
    golden_version,
    load_golden,
    own_golden_path,
    settings_golden_set,
    write_manifest,
)
from tasks.golden_coverage import measure
from tasks.reward.verifiers import DEFAULT_WORKLOAD

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from pyiceberg.catalog import Catalog

    from infra.runtime import Runtime
    from infra.settings import RewardSettings
    from infra.store import ObjectStore

TABLE = "golden_proposals"
HISTORY = "HISTORY"
DECISIONS = ("accept", "edit", "reject")
PASS_AT = 0.5
PER_CLUSTER = 25
EXPORT_FIELDS = ("proposal_id", "workload", "question", "reference", "reason", "decision")


@dataclass
class Proposal:
    """One proposed golden item and why it was chosen."""

    proposal_id: str
    workload: str
    question: str
    reference: str
    reason: str
    cluster: int
    source_trace: str  # the reference's trace
    question_trace: str  # the trace whose (anonymised) question it is
    contexts: list[str] = field(default_factory=list)
    messages: str | None = None  # JSON: the question's conversation, as curate wrote it
    golden_version: str = ""  # the version it was proposed against

    def row(self, at: datetime) -> dict[str, Any]:
        """Its ``golden_proposals`` row, pending."""
        return {**self.__dict__, "status": "pending", "proposed_at": at}


@dataclass
class Proposed:
    """What one ``golden propose`` run found."""

    workload: str
    golden_version: str
    prompts: int
    coverage: float
    clusters: int
    proposals: list[Proposal]
    refused: dict[str, int]  # why -> candidates refused


def proposal_id(workload: str, question: str) -> str:
    """Deterministic: the same question of a workload is always the same proposal."""
    return "p" + hashlib.sha256(f"{workload}\x00{question}".encode()).hexdigest()[:11]


# ---- training data, for decontamination ------------------------------------------------


def trained_trace_ids(store: ObjectStore) -> set[str]:
    """The ``training_examples`` trace ids any model version trained on (their lineage)."""
    from infra.models import list_versions
    from tasks.train.lineage import read_lineage

    ids: set[str] = set()
    for version in list_versions(store):
        try:
            ids.update(read_lineage(store, version).data.training_examples.trace_ids)
        except (ObjectNotFound, ValueError):  # v0 and shipped bases have no lineage
            continue
    return ids


class NearFilter:
    """True for a question near one of ``questions`` once normalised (the train stage's rule,
    :func:`~tasks.train.pairs.normalize_question`), in either direction: one ends with the
    other ("<PERSON> here. What is 3^4?" and "What is 3^4?" are the same item)."""

    def __init__(self, questions: Sequence[str]) -> None:
        from tasks.train.pairs import normalize_question

        self._normalise = normalize_question
        self._suffixes: set[str] = set()
        for q in questions:
            words = normalize_question(q).split()
            self._suffixes.update(" ".join(words[i:]) for i in range(len(words)))
        self._whole = {normalize_question(q) for q in questions}

    def __call__(self, question: str) -> bool:
        words = self._normalise(question).split()
        if " ".join(words) in self._suffixes:  # a known question ends with this one
            return True
        return any(" ".join(words[i:]) in self._whole for i in range(len(words)))


# ---- propose --------------------------------------------------------------------------------


def candidates(
    rows: Sequence[Mapping[str, Any]],
    golden: Sequence[GoldenItem],
    *,
    workload: str,
    golden_version: str,
    threshold: float,
    trained: NearFilter,
    per_cluster: int = PER_CLUSTER,
) -> Proposed:
    """The proposals among ``rows`` (``training_examples`` rows of ``workload``) in the
    clusters ``golden`` does not cover, and the candidates refused (see module)."""
    from tasks.train.pairs import normalize_question

    questions = [str(r["question"]) for r in rows]
    cov = measure(
        questions,
        [it.question for it in golden],
        workload=workload,
        window="curated",
        golden_version=golden_version,
        threshold=threshold,
        max_clusters=1_000,
    )
    near_golden = NearFilter([it.question for it in golden])
    refused: dict[str, int] = {}
    proposals: list[Proposal] = []
    for n, cluster in enumerate(cov.clusters, start=1):
        by_question: dict[str, list[Mapping[str, Any]]] = {}
        for i in cluster.members:
            by_question.setdefault(normalize_question(questions[i]), []).append(rows[i])
        taken = 0
        for key in sorted(by_question):
            group = by_question[key]
            asked = min(group, key=lambda r: (len(str(r["question"])), str(r["trace_id"])))
            question = str(asked["question"])  # the shortest phrasing
            if trained(question):
                refused["near training data"] = refused.get("near training data", 0) + 1
                continue
            if near_golden(question):
                refused["near a golden item"] = refused.get("near a golden item", 0) + 1
                continue
            best, why = _reference(group)
            if best is None:
                refused["no answer to use as reference"] = (
                    refused.get("no answer to use as reference", 0) + 1
                )
                continue
            if taken >= per_cluster:
                refused["cluster already has enough proposals"] = (
                    refused.get("cluster already has enough proposals", 0) + 1
                )
                continue
            taken += 1
            proposals.append(
                Proposal(
                    proposal_id=proposal_id(workload, question),
                    workload=workload,
                    question=question,
                    reference=str(best["answer"]).strip(),
                    reason=(
                        f"uncovered cluster {n} of {len(cov.clusters)} ({cluster.size} prompts, "
                        f"{cluster.share:.0%} of the curated traffic; tokens "
                        f"{' '.join(cluster.terms)}; nearest golden similarity "
                        f"{cluster.nearest_golden:.2f}); asked {len(group)} time(s); {why}"
                    ),
                    cluster=n,
                    source_trace=str(best["trace_id"]),
                    question_trace=str(asked["trace_id"]),
                    contexts=[str(c) for c in asked.get("contexts") or []],
                    messages=asked.get("messages"),
                    golden_version=golden_version,
                )
            )
    return Proposed(
        workload=workload,
        golden_version=golden_version,
        prompts=cov.prompts,
        coverage=cov.share,
        clusters=len(cov.clusters),
        proposals=proposals,
        refused=refused,
    )


def _reference(group: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any] | None, str]:
    """The group's reference answer and why: the verifier passed it (highest reward among
    those), else the best-scored answer."""
    answered = [r for r in group if str(r.get("answer") or "").strip()]
    if not answered:
        return None, ""
    passed = [r for r in answered if (r.get("reward_judge") or 0.0) >= PASS_AT]
    pool = passed or answered
    best = max(pool, key=lambda r: (float(r.get("reward") or 0.0), str(r["trace_id"])))
    reward = float(best.get("reward") or 0.0)
    if passed:
        return best, f"reference: the verifier passed this answer (reward {reward:.2f})"
    return best, f"reference: the best-scored answer (reward {reward:.2f}; no verifier pass)"


def propose(rt: Runtime, workload: str, *, per_cluster: int = PER_CLUSTER) -> Proposed:
    """Propose golden items for ``workload`` from its curated traffic and queue them (see
    module)."""
    from pyiceberg.expressions import EqualTo, IsNull, Or

    from infra.catalog import replace_where, scan

    settings = rt.settings
    items, version = settings_golden_set(settings.reward, workload, workloads=settings.workloads)
    where = EqualTo("workload", workload)
    if workload == DEFAULT_WORKLOAD:
        where = Or(where, IsNull("workload"))
    rows = scan(rt.catalog, "training_examples", where).to_pylist()
    trained_ids = trained_trace_ids(rt.store)
    trained = [str(r["question"]) for r in rows if r["trace_id"] in trained_ids]
    found = candidates(  # a row trained on is itself near training data: refused
        rows,
        items,
        workload=workload,
        golden_version=version,
        threshold=settings.curate.coverage_similarity,
        trained=NearFilter(trained),
        per_cluster=per_cluster,
    )
    now = datetime.now(UTC)
    pending = [p.row(now) for p in found.proposals]
    replace_where(
        rt.catalog,
        TABLE,
        _pending_of(workload),
        pending,
    )
    return found


def _pending_of(workload: str) -> Any:
    from pyiceberg.expressions import And, EqualTo

    return And(EqualTo("workload", workload), EqualTo("status", "pending"))


def export(proposals: Sequence[Mapping[str, Any]]) -> str:
    """The review file: one JSON object a line, ``decision`` empty for a person to fill in
    (``accept``, ``edit`` with the changed ``question`` / ``reference``, or ``reject``)."""
    lines = [
        json.dumps(
            {k: (p.get(k) if k != "decision" else "") for k in EXPORT_FIELDS}, ensure_ascii=False
        )
        for p in proposals
    ]
    return "".join(line + "\n" for line in lines)


# ---- review and publish -----------------------------------------------------------------------


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


def parse_decisions(text: str) -> list[dict[str, Any]]:
    """The review file's lines, each checked (a known proposal id comes later).

    Raises:
        ReviewFileError: a line is not JSON, or its decision is not accept / edit / reject.
    """
    out = []
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
        out.append({**data, "decision": decision})
    return out


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
    queued = {
        r["proposal_id"]: r
        for r in scan(rt.catalog, TABLE, In("proposal_id", ids) if ids else None).to_pylist()
    }
    decided = [d for d in decisions if d["decision"]]
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
    now = datetime.now(UTC)
    rows, items = [], []
    for d in decided:
        row = dict(queued[d["proposal_id"]])
        if d["decision"] == "edit":
            row["question"] = str(d.get("question") or "").strip()
            row["reference"] = str(d.get("reference") or "").strip()
            if not row["question"] or not row["reference"]:
                raise ReviewFileError(
                    f"proposal {d['proposal_id']}: an edit needs a question and a reference"
                )
        row.update(
            status={"accept": "accepted", "edit": "edited", "reject": "rejected"}[d["decision"]]
        )
        row.update(reviewer=reviewer, decided_at=now)
        rows.append(row)
        if d["decision"] != "reject":
            items.append(_item(row))
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


def _item(row: Mapping[str, Any]) -> GoldenItem:
    """A golden item from a reviewed proposal (its conversation as curate wrote it, the last
    user turn replaced by an edited question)."""
    messages = json.loads(row["messages"]) if row.get("messages") else []
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


def pending(catalog: Catalog, workload: str) -> list[dict[str, Any]]:
    """The workload's pending proposals."""
    from infra.catalog import scan

    return scan(catalog, TABLE, _pending_of(workload)).to_pylist()
