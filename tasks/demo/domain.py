"""The embedded demo domain: a calculator agent answering two-digit additions.

A user asks "What is 23+58?" (in one of a few phrasings, often after a preamble that leaks
personal data); the agent calls a calculator tool, whose result ("calculator: 23 + 58 = 81") is
the context the answer must be faithful to; the model answers "81".

Split: an unordered operand pair {a, b} is *golden* when a keyed hash of it falls under
``GOLDEN_PERCENT``. Golden pairs (in either order, in any phrasing) are never sent by the
simulator nor used to pre-train v0, so the golden set is disjoint from anything the model can
see in training; :func:`is_golden_question` lets the train stage decontaminate.

Verifier: binary, no partial credit. A calculator answer is right or wrong; a near miss is
wrong, and so is a hedge. Score 1.0 when the numbers in the answer, ignoring the question's
own operands, are exactly ``{a + b}`` ("81", "The answer is 81.", "23 + 58 = 81"), else 0.0
("82", "81 or 82", "", "I don't know").
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infra.traces.conversation import Messages, ToolCall
from tasks import golden
from tasks.golden import GOLDEN_DIR, GoldenItem, write_manifest

DOMAIN_VERSION = "arith-add-2d/v1"
GOLDEN_FILE = "arithmetic.jsonl"
GOLDEN_PERCENT = 12  # share of unordered operand pairs reserved for the golden set
GOLDEN_SIZE = 400
OPERAND_RANGE = range(10, 100)

# (template id, format, sampling weight): the primary phrasing dominates, as in real traffic
TEMPLATES: list[tuple[str, str, float]] = [
    ("what_is", "What is {a}+{b}?", 0.40),
    ("what_is_spaced", "What is {a} + {b}?", 0.15),
    ("compute", "Compute {a} plus {b}.", 0.15),
    ("equation", "{a} + {b} = ?", 0.15),
    ("sum_of", "What's the sum of {a} and {b}?", 0.15),
]

_EXPR = re.compile(
    r"(?<!\d)(\d{1,3})\s*(?:\+|plus)\s*(\d{1,3})(?!\d)"
    r"|sum of\s+(\d{1,3})\s+and\s+(\d{1,3})(?!\d)",
    re.IGNORECASE,
)
_CONTEXT = re.compile(r"calculator:\s*(\d+)\s*\+\s*(\d+)\s*=\s*(-?\d+)")
_NUMBER = re.compile(r"-?\d+")


class UnverifiableQuestion(ValueError):
    """Neither the question nor its contexts say what the right answer is."""


@dataclass(frozen=True)
class DomainItem:
    """One question of the domain (a golden item, or what a simulated user asks)."""

    item_id: str
    question: str
    contexts: list[str]
    reference: str
    slice: str
    template: str = ""
    operands: tuple[int, int] | None = field(default=None, compare=False)
    workload: str = field(default="calculator", compare=False)  # the demo agent asking it

    def to_json(self) -> dict[str, Any]:
        """The item as one JSONL line's object."""
        data = asdict(self)
        data["operands"] = list(self.operands) if self.operands else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DomainItem:
        """An item from one JSONL line's object (unknown keys ignored)."""
        ops = data.get("operands")
        return cls(
            item_id=str(data["item_id"]),
            question=str(data["question"]),
            contexts=[str(c) for c in data.get("contexts", [])],
            reference=str(data["reference"]),
            slice=str(data.get("slice", "all")),
            template=str(data.get("template", "")),
            operands=(int(ops[0]), int(ops[1])) if ops else None,
            workload=str(data.get("workload") or "calculator"),
        )


def calculator_call(a: int, b: int, call_id: str) -> ToolCall:
    """The agent's calculator tool call for ``a + b`` (OpenAI ``tool_calls`` entry)."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "calculator", "arguments": json.dumps({"expression": f"{a} + {b}"})},
    }


def calculator_context(a: int, b: int) -> str:
    """What the calculator tool returns for ``a + b`` (the context of every item)."""
    return f"calculator: {a} + {b} = {a + b}"


def slice_of(a: int, b: int) -> str:
    """``carry`` when the units digits carry into the tens, else ``no_carry``."""
    return "carry" if (a % 10) + (b % 10) >= 10 else "no_carry"


def is_golden_pair(a: int, b: int) -> bool:
    """True when the unordered pair {a, b} is reserved for the golden set."""
    lo, hi = sorted((a, b))
    digest = hashlib.sha256(f"flywheel-golden:{lo}:{hi}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100 < GOLDEN_PERCENT


def golden_pairs() -> frozenset[tuple[int, int]]:
    """Every ordered operand pair reserved for evaluation (never trained on, never simulated)."""
    return frozenset((a, b) for a in OPERAND_RANGE for b in OPERAND_RANGE if is_golden_pair(a, b))


def training_pairs() -> list[tuple[int, int]]:
    """Every ordered operand pair that training and the simulator may use."""
    return [(a, b) for a in OPERAND_RANGE for b in OPERAND_RANGE if not is_golden_pair(a, b)]


def make_item(a: int, b: int, template: str, item_id: str | None = None) -> DomainItem:
    """The item asking ``a + b`` in the phrasing ``template``."""
    fmt = next(f for t, f, _ in TEMPLATES if t == template)
    return DomainItem(
        item_id=item_id or f"add-{a}-{b}-{template}",
        question=fmt.format(a=a, b=b),
        contexts=[calculator_context(a, b)],
        reference=str(a + b),
        slice=slice_of(a, b),
        template=template,
        operands=(a, b),
    )


def sample_template(rng: random.Random) -> str:
    """A phrasing, drawn by the templates' weights."""
    names = [t for t, _, _ in TEMPLATES]
    return rng.choices(names, weights=[w for _, _, w in TEMPLATES], k=1)[0]


def sample_question(rng: random.Random) -> DomainItem:
    """A random non-golden item for the simulator and for pre-training."""
    while True:
        a, b = rng.choice(OPERAND_RANGE), rng.choice(OPERAND_RANGE)
        if not is_golden_pair(a, b):
            return make_item(a, b, sample_template(rng))


def parse_operands(question: str) -> tuple[int, int] | None:
    """The operands of the (last) addition asked in ``question``, PII preambles and all."""
    matches = list(_EXPR.finditer(question))
    if not matches:
        return None
    groups = [g for g in matches[-1].groups() if g is not None]
    return int(groups[0]), int(groups[1])


def is_golden_question(question: str) -> bool:
    """True when the question asks about a golden operand pair, in any order or phrasing (the
    demo's matcher over every workload is :func:`tasks.demo.workloads.is_golden_question`)."""
    ops = parse_operands(question)
    return ops is not None and is_golden_pair(*ops)


def expected_answer(question: str, contexts: list[str] | None = None) -> str:
    """The right answer, computed from the question, else read from the calculator context.

    Raises:
        UnverifiableQuestion: neither source names an addition.
    """
    ops = parse_operands(question)
    if ops is not None:
        return str(ops[0] + ops[1])
    for ctx in contexts or []:
        m = _CONTEXT.search(ctx)
        if m:
            return m.group(3)
    raise UnverifiableQuestion("no addition found in the question or its contexts")


def verify(
    question_or_item: str | DomainItem, answer: str, contexts: list[str] | None = None
) -> float:
    """1.0 for exactly the right number as the answer, 0.0 otherwise (see module docstring).

    Raises:
        UnverifiableQuestion: a plain question whose right answer cannot be determined.
    """
    if isinstance(question_or_item, DomainItem):
        reference = question_or_item.reference
        ops = question_or_item.operands or parse_operands(question_or_item.question)
    else:
        reference = expected_answer(question_or_item, contexts)
        ops = parse_operands(question_or_item)
    if not _NUMBER.fullmatch(reference.strip()):
        return 1.0 if _normalise(answer) == _normalise(reference) else 0.0
    numbers = {int(n) for n in _NUMBER.findall(answer or "")}
    if ops is not None:
        numbers -= {ops[0], ops[1]} - {int(reference)}
    return 1.0 if numbers == {int(reference)} else 0.0


def _normalise(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", (text or "").lower()).split())


# ---- golden set -------------------------------------------------------------------------


def build_golden(n: int = GOLDEN_SIZE, seed: int = 20240601) -> list[DomainItem]:
    """The golden items: ``n`` golden operand pairs, balanced over templates, stable order."""
    rng = random.Random(seed)
    pairs = sorted(golden_pairs())
    rng.shuffle(pairs)
    names = [t for t, _, _ in TEMPLATES]
    items = [
        make_item(a, b, names[i % len(names)], item_id=f"g{i:04d}")
        for i, (a, b) in enumerate(pairs[:n])
    ]
    for item in items:
        if verify(item, item.reference) != 1.0:  # every reference is checked by the verifier
            raise AssertionError(f"golden item {item.item_id} fails its own verifier")
    return items


def agent_call(item: DomainItem) -> Messages:
    """The calculator agent's final call for ``item``, as the simulator and the gateway see
    it: the question, the calculator call and its result."""
    messages: Messages = [{"role": "user", "content": item.question}]
    if item.operands:
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [calculator_call(*item.operands, "call_0")],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": item.contexts[0]},
        ]
    return messages


def to_golden(item: DomainItem) -> GoldenItem:
    """``item`` as a platform golden item, asked as the calculator agent asks it."""
    extra = {"template": item.template, "operands": list(item.operands) if item.operands else None}
    return GoldenItem(
        item_id=item.item_id,
        question=item.question,
        contexts=list(item.contexts),
        reference=item.reference,
        slice=item.slice,
        messages=agent_call(item),
        extra=extra,
    )


def write_golden(golden_dir: Path = GOLDEN_DIR, n: int = GOLDEN_SIZE) -> Path:
    """Regenerate ``golden/arithmetic.jsonl`` and its MANIFEST."""
    golden_dir.mkdir(parents=True, exist_ok=True)
    path = golden_dir / GOLDEN_FILE
    items = [to_golden(item).to_json() for item in build_golden(n)]
    path.write_text("".join(json.dumps(item, sort_keys=True) + "\n" for item in items))
    write_manifest(golden_dir)
    return path


def load_golden(path: str | Path | None = None) -> list[DomainItem]:
    """The golden items as domain items (operands and template kept), through the platform's
    loader (default: the repository's golden/)."""
    return [DomainItem.from_json(it.to_json()) for it in golden.load_golden(path)]


if __name__ == "__main__":  # python -m tasks.demo.domain  -> regenerate the golden set
    print(write_golden())
