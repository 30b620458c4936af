"""How much of production a golden set covers: each curate run measures, per workload, how far
the window's (anonymised) prompts are from the workload's golden questions, and reports the
share no golden item covers with the clusters of those prompts.

The measure (a nearest neighbour on TF-IDF, no model to download):

- text: lower-cased, every run of digits replaced by ``0`` (prompts that differ only in their
  numbers, "What is 23+58?" and "What is 41+17?", have the same shape), the anonymiser's
  placeholders (``<PERSON>``) dropped; tokens are words and single punctuation or operator
  characters (``+``, ``^``, ``:``), weighted by TF-IDF fitted on the golden questions and the
  window's prompts together (sub-linear term frequency);
- a prompt's similarity to the golden set is the highest cosine between the golden questions
  and the prompt or any one of its sentences (a greeting or a sentence of personal context
  before the question does not make a covered question uncovered);
- a prompt is *covered* when that similarity is at least ``FLYWHEEL_CURATE__COVERAGE_SIMILARITY``
  (0.6: on the demo every phrasing of a golden template scores 1.0, a clock question against
  the calculator's set at most 0.46, an exponentiation at most 0.40);
- uncovered prompts are grouped greedily by that nearest part (the question, not the
  greeting before it): a prompt joins the most similar group whose first prompt it is at
  least as similar to as the threshold, else starts one; each group is
  reported with its size, its most telling tokens, and one example: the anonymised text of a
  member that k-anonymity released (a group with none shows no text). The stored measure
  keeps shares and sizes and names the example by trace id only (no text, no tokens).

``flywheel_golden_coverage{workload}`` carries the covered share; the gate's report warns when
the last measure of its workload fell below ``FLYWHEEL_CURATE__COVERAGE_MIN``. The latest
measure per workload is ``curate/coverage/<workload>.json`` in the object store.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from infra.errors import ObjectNotFound
from infra.keys import coverage_key

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.metrics.stage import StageReport
    from infra.settings import CurateSettings, RewardSettings
    from infra.store import ObjectStore
    from tasks.datasets import TrainingExample

log = logging.getLogger(__name__)
_PLACEHOLDER = re.compile(r"<[A-Z_]+>")
_DIGITS = re.compile(r"\d+")
_SENTENCE = re.compile(r"(?<=[.?!])\s+")
TOKENS = r"\w+|[^\w\s]"
MAX_CLUSTERS = 8
TERMS = 5


def normalise(text: str) -> str:
    """The text the measure compares (see module): lower case, digits as 0, no placeholders."""
    return _DIGITS.sub("0", _PLACEHOLDER.sub(" ", text).lower())


def sentences(text: str) -> list[str]:
    """The text's sentences (itself when it has one)."""
    parts = [s for s in _SENTENCE.split(text.strip()) if s.strip()]
    return parts or [text]


@dataclass(frozen=True)
class GoldenSet:
    """The golden questions a measure compares with, and the golden set's version."""

    questions: Sequence[str]
    version: str


@dataclass
class Cluster:
    """A group of uncovered prompts: size, share of the window, telling tokens, one example."""

    size: int
    share: float
    terms: list[str]
    example: str | None  # anonymised text of a released member; None: none was released
    example_trace: str | None = None  # its trace id (what the stored measure keeps)
    nearest_golden: float = 0.0  # the group's first prompt's similarity to the golden set
    members: list[int] = field(default_factory=list, repr=False)  # indices; never stored


@dataclass
class Coverage:
    """One workload's coverage by its golden set in one window."""

    workload: str
    window: str
    golden_version: str
    prompts: int
    covered: int
    threshold: float
    clusters: list[Cluster] = field(default_factory=list)

    @property
    def share(self) -> float:
        """Covered prompts / prompts (1.0 without prompts: nothing is uncovered)."""
        return self.covered / self.prompts if self.prompts else 1.0

    @property
    def uncovered_share(self) -> float:
        """The share of the window's prompts no golden item covers."""
        return 1.0 - self.share

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with the shares."""
        data = asdict(self)
        for cluster in data["clusters"]:
            del cluster["members"]
        return {**data, "coverage": self.share, "uncovered_share": self.uncovered_share}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Coverage:
        """The inverse of :meth:`as_dict`."""
        fields = {k: v for k, v in data.items() if k not in ("coverage", "uncovered_share")}
        fields["clusters"] = [Cluster(**c) for c in data.get("clusters") or []]
        return cls(**fields)

    def line(self) -> str:
        """One line a person reads."""
        return (
            f"golden set {self.golden_version} covers {self.share:.0%} of {self.prompts} "
            f"{self.workload} prompts in window {self.window} (similarity >= {self.threshold:g}); "
            f"{len(self.clusters)} uncovered cluster(s)"
        )


def similarities(prompts: Sequence[str], golden: Sequence[str]) -> tuple[list[float], Any, Any]:
    """Each prompt's similarity to its nearest golden question (see module), with the fitted
    vectoriser and each prompt's vector: of the part (the prompt or one of its sentences)
    nearest the golden set, the question rather than the greeting before it."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    vectoriser = TfidfVectorizer(
        preprocessor=normalise, token_pattern=TOKENS, sublinear_tf=True, lowercase=False
    )
    vectoriser.fit([*golden, *prompts])
    gold = vectoriser.transform(list(golden))
    parts: list[str] = []
    owner: list[int] = []
    for i, prompt in enumerate(prompts):
        split = sentences(prompt)
        for part in [*split, prompt] if len(split) > 1 else [prompt]:
            parts.append(part)
            owner.append(i)
    sims = cosine_similarity(vectoriser.transform(parts), gold).max(axis=1)  # one pass
    best: list[int] = [-1] * len(prompts)
    for j, i in enumerate(owner):
        if best[i] < 0 or sims[j] > sims[best[i]]:
            best[i] = j
    out = [float(sims[j]) for j in best]
    return out, vectoriser, vectoriser.transform([parts[j] for j in best])


def measure(
    prompts: Sequence[str],
    golden: GoldenSet,
    *,
    workload: str,
    window: str,
    threshold: float,
    released: Sequence[bool] | None = None,
    ids: Sequence[str] | None = None,
    max_clusters: int = MAX_CLUSTERS,
) -> Coverage:
    """The coverage of ``prompts`` (anonymised) by the ``golden`` set's questions; ``released``:
    per prompt, whether k-anonymity released it (only a released prompt is shown as an example;
    None: all were); ``ids``: each prompt's trace id (the stored measure names its examples by
    them)."""
    cov = Coverage(workload, window, golden.version, len(prompts), 0, threshold)
    if not prompts:
        return cov
    if not golden.questions:
        sims, vectoriser, vectors = [0.0] * len(prompts), None, None
    else:
        sims, vectoriser, vectors = similarities(prompts, golden.questions)
    cov.covered = sum(s >= threshold for s in sims)
    uncovered = [i for i, s in enumerate(sims) if s < threshold]
    groups = _group(uncovered, vectors, threshold)
    released = released if released is not None else [True] * len(prompts)
    terms = vectoriser.get_feature_names_out() if vectoriser is not None else []
    for members in sorted(groups, key=len, reverse=True)[:max_clusters]:
        shown = next((i for i in members if released[i]), None)
        cov.clusters.append(
            Cluster(
                size=len(members),
                share=len(members) / len(prompts),
                terms=_terms(vectors, members, terms),
                example=prompts[shown] if shown is not None else None,
                example_trace=ids[shown] if ids is not None and shown is not None else None,
                nearest_golden=round(sims[members[0]], 3),
                members=members,
            )
        )
    return cov


def _group(indices: list[int], vectors: Any, threshold: float) -> list[list[int]]:
    """Greedy leader grouping of ``indices`` by cosine on ``vectors`` (None: one group)."""
    if vectors is None:
        return [indices] if indices else []
    from sklearn.metrics.pairwise import cosine_similarity

    groups: list[list[int]] = []
    for i in indices:
        if groups:
            leaders = vectors[[g[0] for g in groups]]
            sims = cosine_similarity(vectors[i], leaders)[0]
            best = int(sims.argmax())
            if sims[best] >= threshold:
                groups[best].append(i)
                continue
        groups.append([i])
    return groups


def _terms(vectors: Any, members: list[int], names: Any) -> list[str]:
    """The group's heaviest tokens (words, not lone punctuation or 0)."""
    if vectors is None or not len(names):
        return []
    weights = vectors[members].sum(axis=0).A1
    order = weights.argsort()[::-1]
    out = []
    for j in order:
        name = str(names[j])
        if weights[j] <= 0:
            break
        if name != "0" and (name.isalnum() or len(name) == 1 and name not in ".,?!"):
            out.append(name)
        if len(out) == TERMS:
            break
    return out


# ---- the stored measure, the gauge, the gate's warning -------------------------------------


def save(store: ObjectStore, coverage: Coverage) -> str:
    """Write ``coverage`` as its workload's latest measure: shares, sizes, and the examples by
    trace id only, never text nor tokens (the text stays in ``flywheel.training_examples``,
    which forget-user reaches); returns the key."""
    key = coverage_key(coverage.workload)
    data = coverage.as_dict()
    for cluster in data["clusters"]:
        cluster["example"], cluster["terms"] = None, []
    store.put(key, json.dumps(data, indent=2).encode())
    return key


def latest(store: ObjectStore, workload: str) -> Coverage | None:
    """The last curate run's measure for ``workload`` (None: never measured)."""
    try:
        return Coverage.from_dict(json.loads(store.get(coverage_key(workload))))
    except ObjectNotFound:
        return None


def report(report: StageReport, coverage: Coverage) -> None:
    """The coverage gauges of one workload."""
    report.gauge("flywheel_golden_coverage", coverage.share, workload=coverage.workload)
    report.gauge(
        "flywheel_golden_uncovered_clusters",
        float(len(coverage.clusters)),
        workload=coverage.workload,
    )


def gate_warning(coverage: Coverage | None, *, minimum: float, golden_version: str) -> str | None:
    """The gate report's warning when the workload's last measured coverage is below
    ``minimum`` (None: no warning, or never measured)."""
    if coverage is None or coverage.prompts == 0 or coverage.share >= minimum:
        return None
    other = (
        ""
        if coverage.golden_version == golden_version
        else f" (measured against golden set {coverage.golden_version}, not {golden_version})"
    )
    return (
        f"the golden set covers only {coverage.share:.0%} of the {coverage.workload} prompts of "
        f"window {coverage.window} (below {minimum:.0%}){other}: this decision may not predict "
        f"what users get; refresh it with flywheel golden propose --workload {coverage.workload}"
    )


def measure_window(
    store: ObjectStore,
    reward: RewardSettings,
    curate: CurateSettings,
    *,
    window: str,
    examples: Sequence[TrainingExample],
    released: set[str],
    workloads: Sequence[str] = (),
) -> list[Coverage]:
    """Each workload's coverage among the window's anonymised ``examples`` (``released``: the
    trace ids k-anonymity released), stored as its latest measure."""
    from infra.errors import UnknownWorkload
    from tasks.golden import settings_golden_set
    from tasks.reward.verifiers import DEFAULT_WORKLOAD

    by_workload: dict[str, list[TrainingExample]] = {}
    for ex in examples:
        by_workload.setdefault(str(ex.get("workload") or DEFAULT_WORKLOAD), []).append(ex)
    out = []
    for workload, rows in sorted(by_workload.items()):
        try:
            items, version = settings_golden_set(reward, workload, workloads=workloads)
        except (UnknownWorkload, OSError, ValueError) as exc:  # never fails the curate run
            log.warning("golden coverage of %s not measured: %s", workload, exc)
            continue
        cov = measure(
            [str(r["question"]) for r in rows],
            GoldenSet([it.question for it in items], version),
            workload=workload,
            window=window,
            threshold=curate.coverage_similarity,
            released=[r["trace_id"] in released for r in rows],
            ids=[str(r["trace_id"]) for r in rows],
        )
        save(store, cov)
        out.append(cov)
    return out
