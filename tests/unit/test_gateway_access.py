"""Who may reach which version, request parsing limits, and the trace cap's cost: the pure
parts of the gateway's edge."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from infra.gateway import limits
from infra.gateway.chat_request import BadRequest, ChatLimits, parse_chat_request, too_deep
from infra.gateway.cohorts import Decision
from infra.gateway.service import Gateway, servable

MESSAGES = [{"role": "user", "content": "hi"}]


def state(**fields: Any) -> SimpleNamespace:
    """A routing state; ``retired`` as the erasure work adds it (absent: none retired)."""
    base = {"stable": "v0", "candidate": "v1", "rejected": ["v2"], "weight": 10.0}
    return SimpleNamespace(**{**base, **fields})


def refused(decision: Decision, routing: Any, *, admin: bool) -> int | None:
    async def known(_version: str) -> bool:
        return True

    fake = SimpleNamespace(known_version=known)
    response = asyncio.run(
        Gateway.refuse(fake, decision, state=routing, model=decision.version, admin=admin)  # type: ignore[arg-type]
    )
    return None if response is None else response.status_code


@pytest.mark.parametrize(
    ("version", "admin", "status"),
    [
        ("v0", False, None),  # the stable version by name: released
        ("v1", False, 404),  # the candidate by name
        ("v2", False, 404),  # rejected
        ("v7", False, 404),  # unreleased or old
        ("v1", True, None),
        ("v2", True, None),
        ("v3", True, 404),  # retired: not even the admin
        ("v3", False, 404),
    ],
)
def test_only_released_versions_are_public_and_retired_ones_are_never_served(
    version: str, admin: bool, status: int | None
) -> None:
    routing = state(retired=["v3"])
    assert refused(Decision(version=version, route="pinned"), routing, admin=admin) == status


def test_a_state_without_a_retired_list_retires_nothing() -> None:
    assert refused(Decision(version="v1", route="pinned"), state(), admin=True) is None


def test_a_retired_canary_or_shadow_is_replaced_by_the_stable_version() -> None:
    routing = state(retired=["v1"])
    assert servable(Decision(version="v1", route="canary"), routing) == Decision("v0", "stable")  # type: ignore[arg-type]
    shadowed = Decision(version="v0", route="stable", shadow_version="v1")
    assert servable(shadowed, routing).shadow_version is None  # type: ignore[arg-type]
    retired_stable = state(retired=["v0"])
    assert refused(Decision(version="v0", route="stable"), retired_stable, admin=False) == 503


def parse(body: dict[str, Any], **limits_: int) -> Any:
    limits = ChatLimits(
        max_tokens_limit=limits_.get("max_tokens_limit", 100),
        max_messages=limits_.get("max_messages", 10),
    )
    return parse_chat_request(body, limits=limits, session_header=None)


def test_no_budget_is_invented_and_a_huge_one_is_clamped() -> None:
    assert parse({"messages": MESSAGES}).params.max_tokens is None
    assert parse({"messages": MESSAGES, "max_tokens": 10**7}).params.max_tokens == 100
    assert parse({"messages": MESSAGES, "max_completion_tokens": 7}).params.max_tokens == 7


@pytest.mark.parametrize(
    "extra",
    [
        {"max_tokens": 1e300},
        {"max_tokens": 0},
        {"max_tokens": 2.5},
        {"temperature": float("inf")},
        {"temperature": float("nan")},
        {"top_p": 3},
        {"seed": 1e300},
        {"presence_penalty": -1e9},
        {"top_logprobs": 1000},
        {"logit_bias": {"1": float("inf")}},
        {"chat_template": "x"},
        {"add_generation_prompt": False},
        {"tools": "calculator"},
        {"stop": ["x"] * 1000},
        {"user": "u" * 1000},
        {"messages": MESSAGES * 11},
    ],
)
def test_out_of_range_or_refused_fields_are_bad_requests(extra: dict[str, Any]) -> None:
    with pytest.raises(BadRequest):
        parse({"messages": MESSAGES, **extra})


def test_only_allow_listed_fields_are_forwarded() -> None:
    body = {
        "messages": MESSAGES,
        "tools": [],
        "stop": "\n",
        "top_k": 3,
        "guided_json": {},
        "user": "alice",
        "metadata": {"workload": "w"},
    }
    assert parse(body).params.extra == {"tools": [], "stop": "\n", "top_k": 3}


def test_nesting_is_measured_without_recursion() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    assert too_deep(deep) and not too_deep({"a": [{"b": [1]}]})


def test_capping_a_trace_of_many_messages_costs_time_linear_in_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every character serialised while capping is counted: a few times the record's size,
    not once per dropped message (32k tiny messages took 9.7 s that way)."""
    serialised = 0
    measure = limits._json_len

    def counting(value: Any) -> int:
        nonlocal serialised
        size = measure(value)
        serialised += size
        return size

    monkeypatch.setattr(limits, "_json_len", counting)
    messages = [{"role": "user", "content": f"m{n}"} for n in range(30_000)]
    fields = {"messages": messages, "question": "q", "answer": "a", "contexts": []}
    size = measure(fields)
    assert limits.cap_trace(fields, 1000)
    assert serialised < 5 * size
    assert measure(fields) <= limits.RECORD_FACTOR * 1000
    assert fields["messages"][-1] == messages[-1]  # the last turn stays
