"""The ``faithfulness`` and ``context_recall`` components: ragas with the configured LLM
(``ragas_mode="llm"``), else non-LLM equivalents (``ragas_mode="non_llm"``, see :func:`support`)."""

from __future__ import annotations

import math
import os
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infra.llm import ChatClient

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "and",
        "or",
        "but",
        "not",
        "no",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "why",
        "when",
        "where",
        "i",
        "you",
        "he",
        "she",
        "we",
        "they",
        "me",
        "my",
        "your",
        "our",
        "their",
        "do",
        "does",
        "did",
        "so",
        "as",
        "if",
        "then",
        "than",
        "too",
        "very",
        "can",
        "will",
        "would",
        "should",
        "could",
        "may",
        "might",
        "just",
        "also",
    ]
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

    async def faithfulness(
        self, *, question: str, contexts: list[str], answer: str
    ) -> float | None:
        """How well the answer is supported by the contexts (0..1)."""
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
        self, *, question: str, contexts: list[str], reference: str | None
    ) -> float | None:
        """How much of the reference the contexts hold (0..1; None without a reference)."""
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
