"""The ``judge`` component: a programmatic verifier (the plug-in the settings name), or an LLM
rubric (accuracy, completeness, clarity, conciseness as booleans, composed here in Python)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, StrictBool

if TYPE_CHECKING:
    from infra.llm import ChatClient
    from infra.settings import Settings

RUBRIC_VERSION = "rubric/v1"


@runtime_checkable
class Judge(Protocol):
    """Scores an answer 0..1; ``None`` when it cannot tell (the component is then missing).
    Raises :class:`~infra.errors.JudgeError` when it failed after its retries."""

    kind: str  # "verifier" | "llm"
    costly: bool  # whether skip_when_feedback applies
    config_id: str  # part of the cache key and the reward hash

    async def judge(
        self, *, question: str, contexts: list[str], answer: str, reference: str | None
    ) -> float | None:
        """The answer's score in 0..1, or None when the judge cannot tell."""

    def reference_for(  # noqa: ARG002 - the scorer interface's
        self, question: str, contexts: list[str]
    ) -> str | None:
        """A reference answer the judge knows without a call, if any."""


def judge_id(settings: Settings) -> str:
    """What a judge's verdicts depend on: the LLM judge's model and rubric, or the verifier's
    id (its declared version, else a hash of its code)."""
    if settings.judge.kind == "llm":
        return f"llm:{settings.judge.model}:{RUBRIC_VERSION}"
    from tasks.reward.verifiers import verifier_for

    return verifier_for(settings.reward).config_id


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
        """The rubric's score of ``answer`` (one call to the judge model)."""
        case: dict[str, Any] = {"question": question, "context": contexts, "answer": answer}
        if reference is not None:
            case["reference_answer"] = reference
        messages = [
            {"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": json.dumps(case, ensure_ascii=False)},
        ]
        return rubric_score(await self.client.chat_json(messages, Rubric, max_tokens=256))

    def reference_for(self, question: str, contexts: list[str]) -> str | None:  # noqa: ARG002
        """None: the LLM judge writes a reference only on request (areference)."""
        return None

    async def areference(self, *, question: str, contexts: list[str]) -> str | None:
        """A reference answer written by the judge model (``judge.reference_from_llm``)."""
        messages = [
            {"role": "system", "content": REFERENCE_SYSTEM},
            {
                "role": "user",
                "content": json.dumps(
                    {"question": question, "context": contexts}, ensure_ascii=False
                ),
            },
        ]
        answer = await self.client.chat_json(messages, Reference, max_tokens=512)
        return answer.reference.strip() or None


class Reference(BaseModel):
    """The LLM judge's reference answer for context recall."""

    reference: str


REFERENCE_SYSTEM = (
    "Write the correct, complete answer to the question, using the context when it is "
    'relevant. Reply with exactly one JSON object and nothing else: {"reference": "..."}.'
)


def build_judge(settings: Settings, client: ChatClient | None = None) -> Judge:
    """The judge of ``settings.judge.kind`` (the LLM judge reuses ``client`` when given); for
    ``verifier``, the plug-in ``reward.verifier`` names (default: the embedded demo's)."""
    if settings.judge.kind == "llm":
        from infra.llm import ChatClient

        return LLMJudge(client or ChatClient.from_settings(settings.judge))
    from tasks.reward.verifiers import verifier_for

    return verifier_for(settings.reward)
