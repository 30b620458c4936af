"""The demo domain's verifier, a plug-in like a user's own: the default of
``FLYWHEEL_REWARD__VERIFIER`` (``tasks.demo.verifier:calculator``), also registered as the
entry point ``calculator`` of the group ``flywheel.verifiers``."""

from __future__ import annotations

from typing import Any

from tasks.demo.domain import (
    DOMAIN_VERSION,
    DomainItem,
    UnverifiableQuestion,
    expected_answer,
    verify,
)


def calculator(trace: Any) -> dict[str, Any]:
    """Exact arithmetic, ``None`` on any other question; its reference is the right answer from
    the question alone (a reference read from the contexts would make context recall true by
    construction)."""
    try:
        reference = trace.reference or expected_answer(trace.question, [])
    except UnverifiableQuestion:
        reference = None
    try:
        if trace.reference is not None:
            item = DomainItem("", trace.question, list(trace.contexts), trace.reference, slice="")
            score: float | None = verify(item, trace.answer)
        else:
            score = verify(trace.question, trace.answer, contexts=list(trace.contexts))
    except UnverifiableQuestion:
        score = None
    return {"score": score, "reference": reference}


# the id in cache keys and reward hashes: the domain's version, as the verifier's answers are
calculator.verifier_id = f"verifier:{DOMAIN_VERSION}"  # type: ignore[attr-defined]


def clock(trace: Any) -> dict[str, Any]:
    """Exact ``HH:MM`` time arithmetic (the demo's clock workload), ``None`` on any other
    question; its reference is the right time from the question alone."""
    from tasks.demo import clock as clock_domain

    try:
        reference = trace.reference or clock_domain.expected_answer(trace.question, [])
    except UnverifiableQuestion:
        reference = None
    try:
        if trace.reference is not None:
            item = DomainItem("", trace.question, list(trace.contexts), trace.reference, slice="")
            score: float | None = clock_domain.verify(item, trace.answer)
        else:
            score = clock_domain.verify(trace.question, trace.answer, list(trace.contexts))
    except UnverifiableQuestion:
        score = None
    return {"score": score, "reference": reference}


clock.verifier_id = "verifier:clock-add-min/v1"  # type: ignore[attr-defined]
