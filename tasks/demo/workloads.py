"""The embedded demo's workloads, one agent each: ``calculator`` (2-digit additions,
:mod:`tasks.demo.domain`) and ``clock`` (time arithmetic, :mod:`tasks.demo.clock`).

The platform's workloads (``FLYWHEEL_WORKLOADS``, default both) are the ones the demo runs:
v0 is pre-trained on their questions, the simulator sends their traffic (each request tagged
with its workload when there are several), and ``flywheel run`` trains, gates and releases each
on its own. With the calculator alone, traffic carries no workload (``default``), as before
workloads existed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from infra.errors import ConfigError
from infra.traces.conversation import Messages, ToolCall
from tasks.demo import clock, domain

if TYPE_CHECKING:
    from infra.settings import Settings

CALCULATOR = "calculator"
CLOCK = clock.WORKLOAD
WORKLOADS = (CALCULATOR, CLOCK)
# their verifiers, registered per workload (FLYWHEEL_REWARD__VERIFIERS) by ``flywheel run``
VERIFIERS = {CALCULATOR: "tasks.demo.verifier:calculator", CLOCK: "tasks.demo.verifier:clock"}


def is_golden_question(question: str) -> bool:
    """True when the question asks a golden case of any demo workload, in any phrasing: the
    demo's golden matcher (the train stage's decontamination)."""
    return domain.is_golden_question(question) or clock.is_golden_question(question)


def check(workloads: Sequence[str]) -> tuple[str, ...]:
    """``workloads`` as a tuple in the demo's order.

    Raises:
        ConfigError: empty, or a workload the demo has no agent for.
    """
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown or not workloads:
        raise ConfigError(
            f"FLYWHEEL_WORKLOADS: the embedded demo has no agent for {unknown or list(workloads)};"
            f" it runs {' and/or '.join(WORKLOADS)}"
        )
    return tuple(w for w in WORKLOADS if w in workloads)


def of_settings(settings: Settings) -> tuple[str, ...]:
    """The demo workloads the settings run: ``FLYWHEEL_WORKLOADS`` for the character model;
    the Llama profile learns the calculator alone.

    Raises:
        ConfigError: a configured workload the demo has no agent for.
    """
    return check(settings.workloads) if settings.profile == "demo" else (CALCULATOR,)


def tagged(workloads: Sequence[str]) -> bool:
    """True when traffic names its workload (several workloads; the calculator alone is the
    ``default`` workload)."""
    return len(workloads) > 1


def workload_of(item: domain.DomainItem) -> str:
    """The demo workload asking ``item``."""
    return CLOCK if item.workload == CLOCK else CALCULATOR


def sample_question(
    rng: random.Random, workloads: Sequence[str], weights: Sequence[float] | None = None
) -> domain.DomainItem:
    """A random non-golden question of one of ``workloads`` (equally likely, or by
    ``weights``); with the calculator alone it draws exactly what
    :func:`tasks.demo.domain.sample_question` draws."""
    if tuple(workloads) == (CALCULATOR,):
        return domain.sample_question(rng)
    if weights is None:
        pick = rng.choice(list(workloads))
    else:
        pick = rng.choices(list(workloads), weights=list(weights), k=1)[0]
    return clock.sample_question(rng) if pick == CLOCK else domain.sample_question(rng)


def verify(item: domain.DomainItem, answer: str) -> float:
    """``answer``'s score by ``item``'s workload verifier (1.0 right, 0.0 wrong)."""
    if workload_of(item) == CLOCK:
        return clock.verify(item, answer)
    return domain.verify(item, answer)


def tool_call(item: domain.DomainItem, call_id: str) -> ToolCall:
    """The agent's tool call for ``item`` (calculator or clock)."""
    a, b = item.operands or (0, 0)
    if workload_of(item) == CLOCK:
        return clock.clock_call(a, b, call_id)
    return domain.calculator_call(a, b, call_id)


def agent_call(item: domain.DomainItem) -> Messages:
    """The agent's final call for ``item``: question, tool call and the tool's result."""
    if workload_of(item) == CLOCK:
        return clock.agent_call(item)
    return domain.agent_call(item)


def golden_items(workload: str) -> list[domain.DomainItem]:
    """The repository's golden items of ``workload`` (the calculator's: ``golden/``; the
    clock's: ``golden/clock/``)."""
    from tasks.golden import GOLDEN_DIR

    if workload == CLOCK:
        return domain.load_golden(GOLDEN_DIR / CLOCK)
    return domain.load_golden()


def golden_dir(workload: str) -> Path:
    """The folder holding ``workload``'s golden set (its MANIFEST beside it)."""
    from tasks.golden import GOLDEN_DIR

    return GOLDEN_DIR / CLOCK if workload == CLOCK else GOLDEN_DIR
