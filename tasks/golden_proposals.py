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

``flywheel golden review FILE`` (:func:`tasks.golden_review.review`) stores a person's
decisions and publishes the accepted items as a new golden version.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from infra.errors import ObjectNotFound
from tasks.golden import GoldenItem, settings_golden_set
from tasks.golden_coverage import GoldenSet, measure
from tasks.reward.verifiers import DEFAULT_WORKLOAD

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyiceberg.catalog import Catalog

    from infra.runtime import Runtime
    from infra.store import ObjectStore
    from tasks.datasets import TrainingExample

TABLE = "golden_proposals"
PASS_AT = 0.5
PER_CLUSTER = 25
EXPORT_FIELDS = ("proposal_id", "workload", "question", "reference", "reason", "decision")


class ProposalRow(TypedDict):
    """A ``golden_proposals`` row (infra/catalog_schemas.py); a pending one has no decision."""

    proposal_id: str
    workload: str
    question: str
    reference: str
    reason: str
    cluster: int
    source_trace: str  # the reference's trace
    question_trace: str  # the trace whose question it is
    contexts: list[str]
    messages: str | None  # JSON: the anonymised conversation
    golden_version: str  # proposed against
    status: str  # pending | accepted | edited | rejected
    proposed_at: datetime
    reviewer: NotRequired[str | None]  # a pseudonym, never a name or e-mail
    decided_at: NotRequired[datetime | None]
    new_version: NotRequired[str | None]  # the golden version it entered


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

    def row(self, at: datetime) -> ProposalRow:
        """Its ``golden_proposals`` row, pending."""
        return ProposalRow(
            proposal_id=self.proposal_id,
            workload=self.workload,
            question=self.question,
            reference=self.reference,
            reason=self.reason,
            cluster=self.cluster,
            source_trace=self.source_trace,
            question_trace=self.question_trace,
            contexts=self.contexts,
            messages=self.messages,
            golden_version=self.golden_version,
            status="pending",
            proposed_at=at,
        )


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
    from infra.serving.models import list_versions
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
    rows: Sequence[TrainingExample],
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
        GoldenSet([it.question for it in golden], golden_version),
        workload=workload,
        window="curated",
        threshold=threshold,
        max_clusters=1_000,
    )
    near_golden = NearFilter([it.question for it in golden])
    refused: dict[str, int] = {}
    proposals: list[Proposal] = []
    for n, cluster in enumerate(cov.clusters, start=1):
        by_question: dict[str, list[TrainingExample]] = {}
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


def _reference(group: Sequence[TrainingExample]) -> tuple[TrainingExample | None, str]:
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
    rows: list[TrainingExample] = scan(rt.catalog, "training_examples", where).to_pylist()
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


def export(proposals: Sequence[ProposalRow]) -> str:
    """The review file: one JSON object a line, ``decision`` empty for a person to fill in
    (``accept``, ``edit`` with the changed ``question`` / ``reference``, or ``reject``)."""
    lines = [
        json.dumps(
            {k: (p.get(k) if k != "decision" else "") for k in EXPORT_FIELDS}, ensure_ascii=False
        )
        for p in proposals
    ]
    return "".join(line + "\n" for line in lines)


def pending(catalog: Catalog, workload: str) -> list[ProposalRow]:
    """The workload's pending proposals."""
    from infra.catalog import scan

    return scan(catalog, TABLE, _pending_of(workload)).to_pylist()
