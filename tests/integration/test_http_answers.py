"""The release gate's answers from an HTTP upstream (``infra.serving.answers.HttpAnswers``): the
same client and request as the gateway's, greedy, a few at a time, a failing upstream retried and
then counted as an error, not raised."""

from __future__ import annotations

from infra.serving.answers import HttpAnswers
from tests.fakes.upstream import start_fake_upstream

CONVERSATIONS = [
    [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": f"{n} + 1?"}]
    for n in range(12)
]


def test_every_conversation_gets_its_own_answer_sent_greedy() -> None:
    handle = start_fake_upstream("v3", keep_bodies=True)
    try:
        answers = HttpAnswers("v3", handle.url, concurrency=4).answer(CONVERSATIONS, max_tokens=16)
    finally:
        handle.stop()
    assert [a.error for a in answers] == [False] * 12
    assert [a.text for a in answers] == [f"echo: {n} + 1?" for n in range(12)]
    sent = handle.app.bodies
    assert len(sent) == 12 and {b["model"] for b in sent} == {"v3"}
    assert all(b["temperature"] == 0.0 and b["max_tokens"] == 16 for b in sent)
    assert sorted(b["messages"][-1]["content"] for b in sent) == sorted(
        m[-1]["content"] for m in CONVERSATIONS
    )


def test_an_upstream_that_always_fails_gives_errors_not_an_exception() -> None:
    handle = start_fake_upstream("v3", fail_rate=1.0)
    try:
        answers = HttpAnswers("v3", handle.url, retries=2).answer(CONVERSATIONS[:3], max_tokens=8)
    finally:
        handle.stop()
    assert [a.error for a in answers] == [True] * 3 and handle.app.calls == 6


def test_a_4xx_is_never_retried_and_the_last_failure_is_not_waited_after() -> None:
    """A 400 is the request's fault: one call each. A 500 is retried, and the retries counted
    are one fewer than the calls: no backoff follows the last failure."""
    from infra.retries import RETRIES

    refused = start_fake_upstream("v3", fail_rate=1.0, fail_status=400)
    failing = start_fake_upstream("v3", fail_rate=1.0)
    before = RETRIES.snapshot().get("gate upstream answer", 0)
    try:
        bad = HttpAnswers("v3", refused.url, retries=3).answer(CONVERSATIONS[:3], max_tokens=8)
        down = HttpAnswers("v3", failing.url, retries=3).answer(CONVERSATIONS[:2], max_tokens=8)
    finally:
        refused.stop()
        failing.stop()
    assert [a.error for a in bad + down] == [True] * 5
    assert refused.app.calls == 3 and failing.app.calls == 6
    assert RETRIES.snapshot().get("gate upstream answer", 0) - before == 4  # 2 x (3 - 1)
