"""How the Langfuse clients read the server's answers: ``Retry-After`` in seconds or as a date,
which statuses are retried (with the server's wait), which fail at once and why, and that a
wait longer than a rate-limit window fails clearly instead of hanging."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from infra.errors import SourceError, SourceRateLimited, SourceUnavailable, TransientSourceError
from infra.retries import retry_after_seconds
from infra.traces.langfuse_http import (
    MAX_RETRY_AFTER_S,
    LangfuseHttp,
    translate_status,
)


def test_retry_after_is_read_as_seconds_or_as_a_date() -> None:
    now = datetime(2026, 11, 26, 12, tzinfo=UTC)
    assert retry_after_seconds("30") == 30.0
    date = format_datetime(now + timedelta(hours=2), usegmt=True)
    assert retry_after_seconds(date, now=now) == 7200.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None


def test_a_429_is_retried_after_the_wait_the_server_asked_for() -> None:
    err = translate_status(429, {"retry-after": "17"}, what="v2 observations page", host="h")
    assert isinstance(err, SourceRateLimited) and err.retry_after_s == 17.0
    assert "429" in str(err) and "Retry-After 17 s" in str(err)
    busy = translate_status(503, {}, what="x", host="h")
    assert isinstance(busy, TransientSourceError) and not isinstance(busy, SourceRateLimited)


@pytest.mark.parametrize(
    ("status", "kind"),
    [(404, SourceUnavailable), (405, SourceUnavailable), (401, SourceError), (400, SourceError)],
)
def test_errors_a_retry_cannot_cure_are_never_transient(status: int, kind: type) -> None:
    err = translate_status(status, {}, what="trace delete", host="h")
    assert isinstance(err, kind) and not isinstance(err, TransientSourceError)
    assert translate_status(200, {}, what="x", host="h") is None


def test_page_sizes_are_clamped_to_what_the_endpoint_accepts() -> None:
    with LangfuseHttp(host="http://h", public_key="p", secret_key="s", page_size=500) as c:
        assert c.limit() == 100 and c.limit(1000) == 500


def test_a_daily_limit_fails_at_once_with_the_wait_instead_of_hanging() -> None:
    slept: list[float] = []
    client = LangfuseHttp(host="http://h", public_key="p", secret_key="s", sleep=slept.append)
    calls = 0

    def throttled() -> None:
        nonlocal calls
        calls += 1
        after = 30.0 if calls == 1 else 86_400.0  # a minute window, then a daily budget
        err = translate_status(429, {"retry-after": str(int(after))}, what="delete", host="h")
        assert err is not None
        raise err

    with client, pytest.raises(SourceRateLimited) as caught:
        client.retrying("trace delete", throttled)
    assert calls == 2 and slept == [30.0]  # the short wait was waited out, the long one not
    assert caught.value.retry_after_s == 86_400.0 > MAX_RETRY_AFTER_S
    assert "86400" in str(caught.value)
