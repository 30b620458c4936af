"""k-anonymity that means something (issue 17): paraphrases share a pattern (six users asking
to reset a password in six phrasings reach k=5), other questions do not join them, and order
numbers are removed from the stored question, not only from the key."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from infra.catalog import open_catalog, scan
from infra.settings import get_settings
from infra.store import open_store
from tasks.curate.kanon import placeholder_pattern
from tasks.curate.paraphrase import group_patterns, scrub_identifiers
from tests.data.pii_corpus import plant_window

pytestmark = pytest.mark.integration

RESET = [
    "How do I reset my password?",
    "I forgot my password, how can I change it?",
    "Can you help me reset the password for my account?",
    "password reset please",
    "I can't log in, I need a new password",
    "What's the way to recover my password?",
]
OTHER = [
    "How do I change my email address?",
    "Please cancel my subscription.",
    "Where is my refund?",
    "How do I reset my router?",
    "I forgot my username",
    "How do I update my credit card?",
]


def test_six_phrasings_group_and_other_questions_do_not_join() -> None:
    patterns = [placeholder_pattern(q, []) for q in RESET + OTHER]
    mapping = group_patterns(patterns, [], threshold=get_settings().curate.paraphrase_threshold)
    assert len({mapping[p] for p in patterns[: len(RESET)]}) == 1
    assert all(mapping[p] == p for p in patterns[len(RESET) :])


def test_known_patterns_win() -> None:
    known = [placeholder_pattern("How can I reset my password?", [])]
    mapping = group_patterns([placeholder_pattern(RESET[3], [])], known, threshold=0.65)
    assert list(mapping.values()) == known


def test_identifiers_leave_the_question_short_numbers_stay() -> None:
    assert scrub_identifiers("Where is order ORD-20391? It was 3 items") == (
        "Where is order <ID>? It was 3 items"
    )
    assert scrub_identifiers("What is 12+34?") == "What is 12+34?"


def test_paraphrases_reach_k_and_stored_questions_lose_order_numbers(
    prefect_api, flywheel_home, monkeypatch
) -> None:
    from flows.curate import curate

    monkeypatch.setenv("FLYWHEEL_CURATE__PATTERN_GROUPING", "embedding")
    get_settings.cache_clear()
    start = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    items = [(f"{q} (order 55{i}0193)", f"user-{i}") for i, q in enumerate(RESET)]
    items.append(("Where is my refund?", "user-9"))
    plant_window(open_store(get_settings()), start, items, users=7)
    result = curate(window_start=start)
    rows = scan(open_catalog(get_settings()), "training_examples").to_pylist()
    assert {r["user_key"] for r in rows} and len({r["pattern"] for r in rows}) == 1
    assert result.written == len(rows) == 6 * 3  # three sampled answers per question
    assert result.k_withheld == 3  # the lone refund question waits for k users
    assert not any("0193" in r["question"] for r in rows)
    assert all("<ID>" in r["question"] for r in rows)
