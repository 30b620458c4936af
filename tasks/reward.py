"""The composite reward and its judges: one definition for stage 2 (every trace) and the
release gate (golden items), so a model is judged the same way in both places.

``total = sum(w_i * c_i) / sum(w_i)`` over the components present, clamped to 0..1:

- ``judge``: the demo domain's programmatic verifier, or an LLM rubric (accuracy,
  completeness, clarity, conciseness as booleans, composed here in Python);
- ``faithfulness`` and ``context_recall``: ragas with the configured LLM (``ragas_mode="llm"``),
  else non-LLM equivalents (``ragas_mode="non_llm"``, see :func:`support`);
- ``feedback``: the user's thumbs; ``latency``: the seed's penalty past ``latency_ok_s``.

A missing component (judge failed or could not tell, no reference, no contexts, no feedback
when ``feedback_none=missing``) drops out and the remaining weights are re-normalised;
:attr:`RewardBreakdown.missing` names it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, StrictBool

if TYPE_CHECKING:
    from infra.llm import ChatClient
    from infra.settings import RewardSettings, Settings

REWARD_VERSION = "reward/v1"
RUBRIC_VERSION = "rubric/v1"
CACHE_VERSION = "cache/v1"
COMPONENTS = ("judge", "faithfulness", "context_recall", "feedback", "latency")
CACHED = ("judge", "faithfulness", "context_recall")  # the content-dependent components


@dataclass(frozen=True)
class RewardBreakdown:
    """A total reward in 0..1 and the components it was made of (``None`` = missing)."""

    total: float
    judge: float | None = None
    faithfulness: float | None = None
    context_recall: float | None = None
    feedback: float | None = None
    latency: float | None = None
    missing: list[str] = field(default_factory=list)

    def as_row(self) -> dict[str, Any]:
        """The ``reward``, ``reward_<component>`` and ``missing`` columns of a scores table."""
        row: dict[str, Any] = {"reward": self.total}
        row.update({f"reward_{c}": getattr(self, c) for c in COMPONENTS})
        row["missing"] = list(self.missing)
        return row


def weights(reward: RewardSettings) -> dict[str, float]:
    """w1..w5 of the settings by component name."""
    return {
        "judge": reward.w_judge,
        "faithfulness": reward.w_faithfulness,
        "context_recall": reward.w_context_recall,
        "feedback": reward.w_feedback,
        "latency": reward.w_latency,
    }


def feedback_component(value: int | None, none_policy: str = "neutral") -> float | None:
    """Thumbs up 1.0, down 0.0, neutral 0.5; none 0.5 or missing per ``feedback_none``."""
    if value is None:
        return 0.5 if none_policy == "neutral" else None
    return {1: 1.0, 0: 0.5, -1: 0.0}[int(value)]


def latency_component(latency_s: float | None, ok_s: float, max_s: float) -> float | None:
    """1.0 up to ``ok_s``, falling linearly to 0.0 at ``max_s`` (the seed's penalty)."""
    if latency_s is None or math.isnan(latency_s):
        return None
    if latency_s <= ok_s:
        return 1.0
    if latency_s >= max_s:
        return 0.0
    return 1.0 - (latency_s - ok_s) / (max_s - ok_s)


def combine(components: dict[str, float | None], reward: RewardSettings) -> RewardBreakdown:
    """The weighted total over present components (weights re-normalised), clamped to 0..1.
    ``None`` and NaN both mean missing."""
    w = weights(reward)
    present = {c: clamp(v) for c, v in components.items() if v is not None and not math.isnan(v)}
    missing = [c for c in COMPONENTS if c not in present]
    denom = sum(w[c] for c in present)
    total = sum(w[c] * v for c, v in present.items()) / denom if denom > 0 else 0.0
    return RewardBreakdown(total=clamp(total), missing=missing, **present)


def resolve_ragas_mode(settings: Settings) -> str:
    """``llm`` when a judge endpoint is configured, else ``non_llm``; a ``ragas_mode`` judge
    setting of ``llm``/``non_llm`` overrides (``auto`` is the default)."""
    mode = getattr(settings.judge, "ragas_mode", "auto")  # optional setting, see report
    if mode in ("llm", "non_llm"):
        return str(mode)
    return "llm" if settings.judge.base_url else "non_llm"


def judge_id(settings: Settings) -> str:
    """What a judge's verdicts depend on: kind, and model and rubric for the LLM judge."""
    if settings.judge.kind == "llm":
        return f"llm:{settings.judge.model}:{RUBRIC_VERSION}"
    from tasks.domain import DOMAIN_VERSION

    return f"verifier:{DOMAIN_VERSION}"


def reward_config_hash(
    settings: Settings, *, judge: str | None = None, ragas_mode: str | None = None
) -> str:
    """A short hash of everything a reward value depends on (weights, thresholds, judge kind
    and model, ragas mode), stored beside every score."""
    r = settings.reward
    config = {
        "version": REWARD_VERSION,
        "weights": weights(r),
        "feedback_none": r.feedback_none,
        "latency": [r.latency_ok_s, r.latency_max_s],
        "judge": judge or judge_id(settings),
        "ragas_mode": ragas_mode or resolve_ragas_mode(settings),
        "skip_when_feedback": settings.judge.skip_when_feedback,
    }
    return sha256(json.dumps(config, sort_keys=True))[:16]


def cache_namespace(judge: str, ragas_mode: str) -> str:
    """The cache partition: what cached components depend on besides the content. Weights
    are not part of it, so re-weighting reuses every cached verdict."""
    return sha256(json.dumps([CACHE_VERSION, judge, ragas_mode]))[:16]


def content_key(
    namespace: str, question: str, contexts: list[str], answer: str, reference: str | None
) -> str:
    """The cache key of an answer's content-dependent components (a hash: no text is kept)."""
    payload = [namespace, question, list(contexts), answer, reference]
    return sha256(json.dumps(payload, ensure_ascii=False))


# ---- judges -------------------------------------------------------------------------------


@runtime_checkable
class Judge(Protocol):
    """Scores an answer 0..1; ``None`` when it cannot tell (the component is then missing).
    Raises :class:`~infra.errors.JudgeError` when it failed after its retries."""

    kind: str  # "verifier" | "llm"
    costly: bool  # whether skip_when_feedback applies
    config_id: str  # part of the cache key and the reward hash

    async def judge(
        self, *, question: str, contexts: list[str], answer: str, reference: str | None
    ) -> float | None: ...

    def reference_for(self, question: str, contexts: list[str]) -> str | None: ...


class VerifierJudge:
    """The demo domain's programmatic verifier (free, exact, offline)."""

    kind = "verifier"
    costly = False

    def __init__(self) -> None:
        from tasks.domain import DOMAIN_VERSION

        self.config_id = f"verifier:{DOMAIN_VERSION}"

    async def judge(
        self, *, question: str, contexts: list[str], answer: str, reference: str | None
    ) -> float | None:
        from tasks.domain import DomainItem, UnverifiableQuestion, verify

        try:
            if reference is not None:
                item = DomainItem("", question, list(contexts), reference, slice="")
                return verify(item, answer)
            return verify(question, answer, contexts=list(contexts))
        except UnverifiableQuestion:
            return None

    def reference_for(self, question: str, contexts: list[str]) -> str | None:
        """The right answer from the question alone: a reference read from the contexts would
        make context recall true by construction."""
        from tasks.domain import UnverifiableQuestion, expected_answer

        try:
            return expected_answer(question, [])
        except UnverifiableQuestion:
            return None


class Rubric(BaseModel):
    """The LLM judge's verdict: strict booleans (``"yes"`` or ``1`` are malformed)."""

    accuracy: StrictBool
    completeness: StrictBool
    clarity: StrictBool
    conciseness: StrictBool


def rubric_score(r: Rubric) -> float:
    """Accuracy gates the rest: a wrong answer scores 0 however clear or concise it is (style
    must not buy reward); a right one scores 0.6 plus 0.2 / 0.1 / 0.1 for completeness,
    clarity and conciseness."""
    if not r.accuracy:
        return 0.0
    return 0.6 + 0.2 * r.completeness + 0.1 * r.clarity + 0.1 * r.conciseness


JUDGE_SYSTEM = (
    "You grade an AI assistant's answer. Reply with exactly one JSON object and nothing else: "
    '{"accuracy": true|false, "completeness": true|false, "clarity": true|false, '
    '"conciseness": true|false}. accuracy: the answer is correct for the question and '
    "consistent with the context (and with the reference answer when one is given). "
    "completeness: it answers every part of the question. clarity: it is unambiguous and "
    "well formed. conciseness: it has no filler, hedging or irrelevant text."
)


class LLMJudge:
    """The seed's rubric on any OpenAI-compatible endpoint, booleans composed in Python."""

    kind = "llm"
    costly = True

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.config_id = f"llm:{client.model}:{RUBRIC_VERSION}"

    async def judge(
        self, *, question: str, contexts: list[str], answer: str, reference: str | None
    ) -> float | None:
        case: dict[str, Any] = {"question": question, "context": contexts, "answer": answer}
        if reference is not None:
            case["reference_answer"] = reference
        messages = [
            {"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": json.dumps(case, ensure_ascii=False)},
        ]
        return rubric_score(await self.client.chat_json(messages, Rubric, max_tokens=256))

    def reference_for(self, question: str, contexts: list[str]) -> str | None:
        return None


def build_judge(settings: Settings, client: ChatClient | None = None) -> Judge:
    """The judge of ``settings.judge.kind`` (the LLM judge reuses ``client`` when given)."""
    if settings.judge.kind == "llm":
        from infra.llm import ChatClient

        return LLMJudge(client or ChatClient.from_settings(settings.judge))
    return VerifierJudge()


# ---- faithfulness and context recall ------------------------------------------------------

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+")
_STOPWORDS = frozenset(
    "a an the is are was were be been being am of to in on at by for with from and or but not "
    "no it its this that these those there here what which who whom how why when where i you "
    "he she we they me my your our their do does did so as if then than too very can will "
    "would should could may might just also".split()
)


def _tokens(text: str) -> tuple[set[str], set[str]]:
    numbers, words = set(), set()
    for tok in _TOKEN.findall(text.lower()):
        if tok[0].isdigit():
            numbers.add(tok.replace(",", ""))
        elif tok not in _STOPWORDS and len(tok) > 1:
            words.add(tok)
    return numbers, words


def support(text: str, contexts: list[str]) -> float | None:
    """Share of ``text``'s checkable tokens found in ``contexts`` (the non-LLM equivalent of
    ragas' statement checks): its numbers when it has any (numbers are what a calculator or
    lookup answer asserts, and what a model gets wrong), else its content words. ``None`` when
    the text has nothing checkable. ragas' own ``NonLLMContextRecall`` needs reference
    *contexts* (which traces lack) and the ``rapidfuzz`` package (not installed)."""
    numbers, words = _tokens(text)
    ctx_numbers, ctx_words = _tokens("\n".join(contexts))
    if numbers:
        return len(numbers & ctx_numbers) / len(numbers)
    if words:
        return len(words & ctx_words) / len(words)
    return None


class ContextMetrics:
    """Faithfulness (answer vs contexts) and context recall (reference vs contexts). Both are
    ``None`` without contexts; recall is ``None`` without a reference (as in ragas)."""

    def __init__(self, mode: str, client: ChatClient | None = None) -> None:
        if mode not in ("llm", "non_llm"):
            raise ValueError(f"ragas mode must be 'llm' or 'non_llm', not {mode!r}")
        if mode == "llm" and client is None:
            raise ValueError("ragas_mode='llm' needs an LLM client (FLYWHEEL_JUDGE__BASE_URL)")
        self.mode = mode
        self.client = client
        self._metrics: dict[str, Any] = {}

    async def faithfulness(self, question: str, contexts: list[str], answer: str) -> float | None:
        if not contexts:
            return None
        if not answer.strip():
            return 0.0  # nothing said is nothing grounded (ragas refuses an empty response)
        if self.mode == "non_llm":
            return support(answer, contexts)
        result = await self._metric("faithfulness").ascore(
            user_input=question or "(no question)", response=answer, retrieved_contexts=contexts
        )
        return _finite(result.value)

    async def context_recall(
        self, question: str, contexts: list[str], reference: str | None
    ) -> float | None:
        if not contexts or not reference or not reference.strip():
            return None
        if self.mode == "non_llm":
            return support(reference, contexts)
        result = await self._metric("context_recall").ascore(
            user_input=question or "(no question)", retrieved_contexts=contexts, reference=reference
        )
        return _finite(result.value)

    def _metric(self, name: str) -> Any:
        if name not in self._metrics:  # ragas imports take seconds: only in LLM mode
            os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
            from ragas.metrics.collections import ContextRecall, Faithfulness

            from infra.llm import ragas_llm

            assert self.client is not None
            llm = ragas_llm(self.client)
            self._metrics = {
                "faithfulness": Faithfulness(llm=llm),
                "context_recall": ContextRecall(llm=llm),
            }
        return self._metrics[name]


def _finite(value: Any) -> float | None:
    v = float(value)
    return None if math.isnan(v) else v


def clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
