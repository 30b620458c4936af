"""The gateway edge's pure pieces: signed trace ids, admin-token strength, trace caps, one vote
per trace in a sink batch, the admin URL flows use."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr

from infra.errors import ConfigError
from infra.gateway.feedback import TraceIds, Votes
from infra.gateway.limits import cap_trace
from infra.gateway.secret_checks import check_admin_token
from infra.gateway.tracing import last_vote_only
from infra.settings import GatewaySettings
from infra.traces import FeedbackEvent


def test_trace_ids_verify_only_under_the_key_that_minted_them() -> None:
    ids, other = TraceIds("salt-a"), TraceIds("salt-b")
    minted = [ids.new() for _ in range(200)]
    assert len(set(minted)) == 200
    assert all(len(t) == 32 and int(t, 16) >= 0 for t in minted)  # Langfuse's trace id shape
    assert all(ids.verify(t) for t in minted)
    assert not any(other.verify(t) for t in minted)
    tampered = minted[0][:5] + ("a" if minted[0][5] != "a" else "b") + minted[0][6:]
    assert not ids.verify(tampered)
    assert not ids.verify(minted[0].upper()) and not ids.verify(minted[0] + "0")


def test_trace_ids_minted_by_an_earlier_release_still_verify() -> None:
    """Users send feedback on answers from before a gateway upgrade: the tag is HMAC-SHA256
    under a key derived from the salt, its first 12 hex digits, whatever computes it."""
    key = hmac.new(b"salt-a", b"flywheel gateway trace id", hashlib.sha256).digest()
    nonce = "0123456789abcdef0123"
    earlier = nonce + hmac.new(key, nonce.encode(), hashlib.sha256).hexdigest()[:12]
    assert TraceIds("salt-a").verify(earlier)


def test_votes_remember_the_last_vote_per_trace_within_a_bound() -> None:
    votes = Votes(limit=2)
    assert votes.record("a", -1) is None
    assert votes.record("a", -1) == -1 and votes.record("a", 1) == -1
    votes.record("b", 0)
    votes.record("c", 0)  # "a" is the oldest: forgotten
    assert votes.record("a", 1) is None


@pytest.mark.parametrize(
    ("token", "ok"),
    [
        (None, True),  # admin API off
        ("", True),
        ("change-me", False),
        ("pk-CHANGE_ME-" + "0123456789abcdef" * 2, False),
        ("0123456789abcdef0123456789abcde", False),  # 31 characters
        ("z" * 64, False),
        ("0123456789abcdef0123456789abcdef", True),
    ],
)
def test_admin_token_strength(token: str | None, ok: bool) -> None:
    secret = SecretStr(token) if token is not None else None
    if ok:
        check_admin_token(secret)
    else:
        with pytest.raises(ConfigError, match="FLYWHEEL_GATEWAY__ADMIN_TOKEN") as info:
            check_admin_token(secret)
        assert token and token not in str(info.value)  # the message never echoes the token


def test_cap_trace_cuts_each_text_field_and_says_so() -> None:
    fields: dict[str, Any] = {
        "question": "q" * 150,
        "answer": "a" * 50,
        "contexts": ["c" * 80, "d" * 80, "e" * 10],
        "tool_calls": [{"function": {"arguments": "x" * 500}}],
    }
    assert cap_trace(fields, 100) is True
    assert fields["question"] == "q" * 100 and fields["answer"] == "a" * 50
    assert fields["contexts"] == ["c" * 80, "d" * 20]
    assert fields["tool_calls"] == []
    small: dict[str, Any] = {"question": "q", "answer": "a", "contexts": ["c"], "tool_calls": []}
    assert cap_trace(small, 100) is False and small["question"] == "q"


def test_only_the_last_vote_per_trace_in_a_batch_is_written() -> None:
    at = datetime.now(UTC)

    def vote(trace: str, value: int) -> tuple[str, Any]:
        return ("feedback", FeedbackEvent(trace_id=trace, value=value, at=at))  # type: ignore[arg-type]

    batch = [vote("t1", -1), ("trace", {"trace_id": "t9"}), vote("t1", 1), vote("t2", 0)]
    kept = last_vote_only(batch)
    assert [(k, getattr(p, "value", None)) for k, p in kept] == [
        ("trace", None),
        ("feedback", 1),
        ("feedback", 0),
    ]


def test_the_admin_url_flows_use() -> None:
    assert GatewaySettings().resolved_admin_url is None
    derived = GatewaySettings(url="http://gateway:8088", admin_port=9999)
    assert derived.resolved_admin_url == "http://gateway:9999"
    assert GatewaySettings(url="http://[::1]:8088").resolved_admin_url == "http://[::1]:8089"
    explicit = GatewaySettings(url="http://gateway:8088", admin_url="http://admin:1/")
    assert explicit.resolved_admin_url == "http://admin:1"
