"""The drift scenario's scripted world (:mod:`tasks.demo.drift`): the users' requests (additions,
and exponentiations once the traffic drifts), each with the calculator's result in its context,
and the model versions answering by a fixed accuracy per kind of question."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infra.serving.answers import Answer
from infra.traces.conversation import Messages, ToolCallFunction

POWER_TEMPLATES = ("What is {a} to the power of {b}?", "Compute {a} raised to the power {b}.")
BASES, EXPONENTS = range(2, 14), range(2, 10)
# accuracy per kind: v0 is stable; v1 and v2 are better at additions, far worse at powers
VERSIONS: dict[str, dict[str, float]] = {
    "v0": {"add": 0.80, "power": 0.90},
    "v1": {"add": 0.90, "power": 0.05},
    "v2": {"add": 0.92, "power": 0.10},
}
_CONTEXT = re.compile(r"calculator:\s*(\d+)\s*([+^])\s*(\d+)\s*=\s*(-?\d+)")


@dataclass
class Ask:
    """One simulated request: who asks what, with the calculator's result in the context."""

    user: str
    question: str
    messages: Messages
    kind: str  # add | power
    right: str


def power_ask(rng: random.Random, user: str) -> Ask:
    """A user asking an exponentiation (the calculator tool computes it)."""
    a, b = rng.choice(BASES), rng.choice(EXPONENTS)
    return _ask(user, rng.choice(POWER_TEMPLATES).format(a=a, b=b), f"{a} ^ {b}", a**b, "power")


def add_ask(rng: random.Random, user: str) -> Ask:
    """A user asking an addition (the demo domain's non-golden pairs and phrasings)."""
    from tasks.demo import domain

    item = domain.sample_question(rng)
    a, b = item.operands or (0, 0)
    return _ask(user, item.question, f"{a} + {b}", a + b, "add")


def _ask(user: str, question: str, expr: str, value: int, kind: str) -> Ask:
    context = f"calculator: {expr} = {value}"
    call: ToolCallFunction = {"name": "calculator", "arguments": json.dumps({"expression": expr})}
    messages: Messages = [
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_0", "type": "function", "function": call}],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": context},
    ]
    return Ask(user, question, messages, kind, str(value))


def traffic(n: int, *, power_share: float, seed: int, users: int = 120) -> list[Ask]:
    """``n`` requests of ``users`` users, ``power_share`` of them exponentiations."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        user = f"drift-user-{rng.randrange(users)}"
        out.append(power_ask(rng, user) if rng.random() < power_share else add_ask(rng, user))
    return out


@dataclass
class Scripted:
    """A model version answering by its accuracy per kind (an :class:`AnswerSource`)."""

    version: str
    accuracy: dict[str, float]
    lm: Any = None

    def answer(
        self,
        requests: Sequence[Messages],
        *,
        max_tokens: int,  # noqa: ARG002 - the answerer interface's max_tokens: a scripted reply
    ) -> list[Answer]:
        """Each request's answer: the calculator's result when the version gets it right."""
        return [Answer(self.reply(m), 0.01) for m in requests]

    def reply(self, messages: Messages) -> str:
        """Right when the question's draw (the same for every version) is under the
        version's accuracy for its kind; else off by one."""
        text = "\n".join(str(m.get("content") or "") for m in messages)
        found = _CONTEXT.search(text)
        if found is None:
            return "I don't know"
        kind = "power" if found.group(2) == "^" else "add"
        question = next(str(m["content"]) for m in messages if m.get("role") == "user")
        right = int(found.group(4))
        draw = random.Random(f"{kind}:{question}").random()
        return str(right) if draw < self.accuracy[kind] else str(right + 1)
