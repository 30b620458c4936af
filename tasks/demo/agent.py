"""The demo calculator agent's conversations: what it sends the model for a simulated
request (earlier turns, the user's question, its calculator tool call and the tool's result),
and how a plan of requests falls into conversations (a first question and its follow-ups)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

from infra.traces.conversation import Messages
from tasks.demo.workloads import tool_call

if TYPE_CHECKING:
    from tasks.demo.domain import DomainItem


class Request(Protocol):
    """What the agent reads of a simulated request (:class:`tasks.demo.simulate.SimRequest`)."""

    @property
    def index(self) -> int:
        """The request's place in the plan."""

    @property
    def item(self) -> DomainItem:
        """The question asked."""

    @property
    def text(self) -> str:
        """The user's message (the question, often after a preamble)."""

    @property
    def follows(self) -> int | None:
        """The index of the request this one follows up, if any."""


R = TypeVar("R", bound=Request)


def request_messages(req: Request, history: Messages | None = None) -> Messages:
    """The agent's final call: the earlier turns of the conversation (``history``), the
    question, the agent's tool call (calculator or clock) and the tool's result."""
    call_id = f"call_{req.index:06d}"
    return [
        *(history or []),
        {"role": "user", "content": req.text},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call(req.item, call_id)],
        },
        {"role": "tool", "tool_call_id": call_id, "content": req.item.contexts[0]},
    ]


def conversations(plan: list[R]) -> list[list[R]]:
    """The plan as conversations: each a first request and its follow-ups, in order."""
    chains: dict[int, list[R]] = {}
    head: dict[int, int] = {}
    for req in plan:
        root = head[req.follows] if req.follows is not None else req.index
        head[req.index] = root
        chains.setdefault(root, []).append(req)
    return list(chains.values())
