"""The demo's second workload: a clock agent doing time arithmetic with a clock tool.

A user asks "What time is it 45 minutes after 10:30?" (in one of a few phrasings); the agent
calls its ``clock`` tool, whose result ("clock: 10:30 + 45 min = 11:15") is the context the
answer must be faithful to; the model answers "11:15". Start times run from 01:00 to 11:59 and
the minutes added from 10 to 59, so an answer is at most one hour later (a carry into the hour
is this task's "carry" slice, as with the calculator's additions).

Split: a (start, minutes) question is *golden* when a keyed hash of it falls under
``GOLDEN_PERCENT``; golden questions are never simulated nor pre-trained on, so the golden set
(``golden/clock/``) is disjoint from anything the model sees in training.

Verifier: binary. 1.0 when the answer's times (ignoring the question's own start time) are
exactly ``{HH:MM}`` of the right time ("11:15", "It is 11:15."), else 0.0: near misses, hedges
("11:15 or 11:20"), other formats and empty answers are wrong.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

from infra.traces.conversation import Messages, ToolCall
from tasks.demo.domain import DomainItem, UnverifiableQuestion

WORKLOAD = "clock"
DOMAIN_VERSION = "clock-add-min/v1"
GOLDEN_FILE = "times.jsonl"
GOLDEN_PERCENT = 12  # share of (start, minutes) questions reserved for the golden set
GOLDEN_SIZE = 400
HOURS = range(1, 12)
MINUTES = range(0, 60)
DELTAS = range(10, 60)

# (template id, format, sampling weight); none says "plus" or "+" (the calculator's words)
TEMPLATES: list[tuple[str, str, float]] = [
    ("after", "What time is it {d} minutes after {t}?", 0.40),
    ("will_be", "What time will it be {d} minutes after {t}?", 0.15),
    ("add", "Add {d} minutes to {t}.", 0.15),
    ("min_after", "{d} min after {t} is what time?", 0.15),
    ("from", "Time {d} minutes from {t}?", 0.15),
]

_QUESTION = re.compile(r"(\d{1,3})\s*min(?:ute)?s?\s+(?:after|to|from)\s+(\d{1,2}):(\d{2})")
_CONTEXT = re.compile(r"clock:\s*(\d{1,2}):(\d{2})\s*\+\s*(\d+)\s*min\s*=\s*(\d{1,2}:\d{2})")
_TIME = re.compile(r"(?<!\d)(\d{1,2}):(\d{2})(?!\d)")


def fmt(minutes_of_day: int) -> str:
    """``HH:MM`` of a time given in minutes since midnight (24-hour clock, wraps at 24:00)."""
    m = minutes_of_day % (24 * 60)
    return f"{m // 60:02d}:{m % 60:02d}"


def answer_of(start: int, delta: int) -> str:
    """The right answer: the time ``delta`` minutes after ``start`` (minutes since midnight)."""
    return fmt(start + delta)


def clock_call(start: int, delta: int, call_id: str) -> ToolCall:
    """The agent's clock tool call (OpenAI ``tool_calls`` entry)."""
    args = json.dumps({"time": fmt(start), "add_minutes": delta})
    return {"id": call_id, "type": "function", "function": {"name": "clock", "arguments": args}}


def clock_context(start: int, delta: int) -> str:
    """What the clock tool returns: ``clock: 10:30 + 45 min = 11:15``."""
    return f"clock: {fmt(start)} + {delta} min = {answer_of(start, delta)}"


def is_golden_case(start: int, delta: int) -> bool:
    """True when the question (start time, minutes added) is reserved for the golden set."""
    digest = hashlib.sha256(f"flywheel-golden-clock:{start}:{delta}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100 < GOLDEN_PERCENT


def make_item(start: int, delta: int, template: str, item_id: str | None = None) -> DomainItem:
    """The item asking for ``delta`` minutes after ``start`` in the phrasing ``template``."""
    form = next(f for t, f, _ in TEMPLATES if t == template)
    return DomainItem(
        item_id=item_id or f"clock-{start}-{delta}-{template}",
        question=form.format(d=delta, t=fmt(start)),
        contexts=[clock_context(start, delta)],
        reference=answer_of(start, delta),
        slice="carry" if start % 60 + delta >= 60 else "no_carry",
        template=template,
        operands=(start, delta),
        workload=WORKLOAD,
    )


def sample_question(rng: random.Random) -> DomainItem:
    """A random non-golden clock question for the simulator and for pre-training."""
    names = [t for t, _, _ in TEMPLATES]
    weights = [w for _, _, w in TEMPLATES]
    while True:
        start = rng.choice(HOURS) * 60 + rng.choice(MINUTES)
        delta = rng.choice(DELTAS)
        if not is_golden_case(start, delta):
            return make_item(start, delta, rng.choices(names, weights=weights, k=1)[0])


def parse_question(question: str) -> tuple[int, int] | None:
    """(start in minutes since midnight, minutes added) of the (last) clock question asked."""
    matches = list(_QUESTION.finditer(question))
    if not matches:
        return None
    delta, hour, minute = matches[-1].groups()
    return int(hour) * 60 + int(minute), int(delta)


def is_golden_question(question: str) -> bool:
    """True when the question asks a golden clock case, in any phrasing."""
    case = parse_question(question)
    return case is not None and is_golden_case(*case)


def expected_answer(question: str, contexts: list[str] | None = None) -> str:
    """The right time, computed from the question, else read from the clock's result.

    Raises:
        UnverifiableQuestion: neither source asks a clock question.
    """
    case = parse_question(question)
    if case is not None:
        return answer_of(*case)
    for ctx in contexts or []:
        if m := _CONTEXT.search(ctx):
            return m.group(4)
    raise UnverifiableQuestion("no clock question in the question or its contexts")


def verify(
    question_or_item: str | DomainItem, answer: str, contexts: list[str] | None = None
) -> float:
    """1.0 for exactly the right ``HH:MM`` as the answer, 0.0 otherwise (see module docstring).

    Raises:
        UnverifiableQuestion: a plain question whose right answer cannot be determined.
    """
    if isinstance(question_or_item, DomainItem):
        reference, question = question_or_item.reference, question_or_item.question
    else:
        question = question_or_item
        reference = expected_answer(question, contexts)
    case = parse_question(question)
    times = {f"{int(h):02d}:{mm}" for h, mm in _TIME.findall(answer or "")}
    if any(len(h) != 2 for h, _ in _TIME.findall(answer or "")):
        return 0.0  # "9:05" is not the HH:MM the clock agent answers in
    if case is not None and fmt(case[0]) != reference:
        times.discard(fmt(case[0]))  # echoing the question's start time is not an answer
    return 1.0 if times == {reference} else 0.0


def build_golden(n: int = GOLDEN_SIZE, seed: int = 20240602) -> list[DomainItem]:
    """The golden items: ``n`` golden cases, balanced over templates, stable order."""
    rng = random.Random(seed)
    cases = [(h * 60 + m, d) for h in HOURS for m in MINUTES for d in DELTAS]
    cases = [c for c in cases if is_golden_case(*c)]
    rng.shuffle(cases)
    names = [t for t, _, _ in TEMPLATES]
    items = [
        make_item(s, d, names[i % len(names)], item_id=f"c{i:04d}")
        for i, (s, d) in enumerate(cases[:n])
    ]
    for item in items:
        if verify(item, item.reference) != 1.0:
            raise AssertionError(f"golden item {item.item_id} fails its own verifier")
    return items


def agent_call(item: DomainItem, call_id: str = "call_0") -> Messages:
    """The clock agent's final call for ``item``: the question, the clock call, its result."""
    start, delta = item.operands or (0, 0)
    return [
        {"role": "user", "content": item.question},
        {"role": "assistant", "content": None, "tool_calls": [clock_call(start, delta, call_id)]},
        {"role": "tool", "tool_call_id": call_id, "content": item.contexts[0]},
    ]


def write_golden(golden_dir: Path) -> Path:
    """Regenerate ``golden/clock/times.jsonl`` and its MANIFEST."""
    from tasks.golden import GoldenItem, write_manifest

    golden_dir.mkdir(parents=True, exist_ok=True)
    path = golden_dir / GOLDEN_FILE
    lines = []
    for item in build_golden():
        extra = {"template": item.template, "operands": list(item.operands or ())}
        g = GoldenItem(
            item_id=item.item_id,
            question=item.question,
            contexts=list(item.contexts),
            reference=item.reference,
            slice=item.slice,
            workload=WORKLOAD,
            messages=agent_call(item),
            extra=extra,
        )
        lines.append(json.dumps(g.to_json(), sort_keys=True) + "\n")
    path.write_text("".join(lines))
    write_manifest(golden_dir)
    return path


if __name__ == "__main__":  # python -m tasks.demo.clock  -> regenerate golden/clock/
    from tasks.golden import GOLDEN_DIR

    print(write_golden(GOLDEN_DIR / WORKLOAD))
