"""What the scorer scores (:class:`ScoreItem`) and what it counts (:class:`ScoreStats`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tasks.reward.verifiers import DEFAULT_WORKLOAD


@dataclass(kw_only=True)
class ScoreItem:
    """One answer to score: a trace in stage 2, a golden item's answer in the gate.
    Keyword-only: six fields, three of them optional numbers that are easy to swap."""

    question: str
    contexts: list[str]
    answer: str
    reference: str | None = None
    feedback: int | None = None
    latency_s: float | None = None
    workload: str = DEFAULT_WORKLOAD  # picks the verifier (``reward.verifiers``)
    trace_id: str | None = None  # for plug-in verifiers only; never part of a cache key


@dataclass(kw_only=True)
class ScoreStats:
    """Counters of one scorer. ``judge_calls`` are judge invocations (verifier or LLM); the
    ``llm_*`` fields are HTTP attempts to the endpoint (judge and ragas together)."""

    items: int = 0
    cache_hits: int = 0  # items that needed no computation (cached, or repeated in the run)
    judge_calls: int = 0
    judge_failures: int = 0  # after retries: the judge component is missing for the item
    judge_skipped: int = 0  # feedback present and skip_when_feedback set
    judge_unverifiable: int = 0
    ragas_failures: int = 0
    references_from_llm: int = 0
    ineligible: int = 0  # items missing a component ``reward.required`` asks for
    llm_requests: int = 0
    llm_retries: int = 0
    llm_malformed: int = 0
    llm_budget_exhausted: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counts as a plain dict."""
        return asdict(self)
