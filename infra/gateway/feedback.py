"""Feedback the gateway accepts: only on traces it served, one vote per trace.

Trace ids are signed: 20 random hex digits and a 12-digit HMAC tag (32 hex digits in all, the
shape Langfuse takes as a trace id). ``/v1/feedback`` verifies the tag, so a trace id the
gateway never handed out is refused (404) without any lookup; the check needs no state, so it
holds across restarts and replicas that share the key (derived from ``FLYWHEEL_USER_SALT``).

A trace is counted once in ``user_feedback_total`` (its first vote), and in
``user_feedback_voices_total`` when it is the first vote of its user (the user who was
answered, not whoever posts the vote) in the release line's step: the canary's feedback test
hears one voice per user (:mod:`infra.gateway.voices`). A later vote on the same
trace replaces it where training reads it (the sink keeps the last one) and is counted in
``flywheel_feedback_changed_total`` instead: Prometheus counters cannot go down, and a
decreasing ``user_feedback_total`` would read as a counter reset in ``rate()``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from infra.gateway.chat import error_response, json_response
from infra.gateway.chat_request import too_deep
from infra.gateway.ids import PINNED, random_hex
from infra.gateway.json_shape import body_shape_problem
from infra.gateway.keyring import Refusal, refusal_response
from infra.traces import FeedbackEvent
from infra.traces.conversation import DEFAULT_WORKLOAD

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from infra.gateway.keyring import KeyRing
    from infra.gateway.metrics import GatewayMetrics
    from infra.gateway.tracing import TraceDispatcher
    from infra.gateway.voices import Epoch

# what the gateway remembers of a trace for its vote: the version that answered, its release
# line, the voter and the client key's quota
TraceLabels = tuple[str, str, int | None, tuple[str, int] | None]
NONCE_HEX, TAG_HEX = 20, 12
_TRACE_ID = re.compile(rf"[0-9a-f]{{{NONCE_HEX + TAG_HEX}}}")
FLAT = 16  # arrays and objects a feedback body may hold (a vote has one)
REMEMBERED_VOTES = 100_000  # trace id -> vote kept for deduplication (oldest forgotten first)


class TraceIds:
    """Mints and verifies signed trace ids."""

    def __init__(self, secret: str) -> None:
        key = hmac.new(secret.encode(), b"flywheel gateway trace id", hashlib.sha256).digest()
        self._mac = hmac.new(key, digestmod=hashlib.sha256)  # keyed once; copied per id

    def _tag(self, nonce: str) -> str:
        mac = self._mac.copy()
        mac.update(nonce.encode())
        return mac.hexdigest()[:TAG_HEX]

    def new(self) -> str:
        """A fresh trace id: a random nonce and its signature."""
        nonce = random_hex(NONCE_HEX // 2)
        return nonce + self._tag(nonce)

    def verify(self, trace_id: str) -> bool:
        """Whether ``trace_id`` is well formed and signed with this gateway's secret."""
        if not _TRACE_ID.fullmatch(trace_id):
            return False
        nonce, tag = trace_id[:NONCE_HEX], trace_id[NONCE_HEX:]
        return hmac.compare_digest(tag, self._tag(nonce))


class Votes:
    """The vote last accepted per trace (bounded), to count each trace once."""

    def __init__(self, limit: int = REMEMBERED_VOTES) -> None:
        self.limit = limit
        self._votes: OrderedDict[str, int] = OrderedDict()

    def record(self, trace_id: str, value: int) -> int | None:
        """Remember ``value`` for ``trace_id``; returns the vote it replaces (None: first)."""
        previous = self._votes.pop(trace_id, None)
        self._votes[trace_id] = value
        if len(self._votes) > self.limit:
            self._votes.popitem(last=False)
        return previous


def parse_feedback(body: Any) -> FeedbackEvent:
    """The event in ``{trace_id, value: 1|0|-1, comment?}``.

    Raises:
        ValueError: the body does not have that shape (the message says which field).
    """
    if not isinstance(body, dict) or too_deep(body, 4):
        raise ValueError("the body must be a flat JSON object")
    trace_id = body.get("trace_id")
    value = body.get("value")
    comment = body.get("comment")
    if not isinstance(trace_id, str) or not 0 < len(trace_id) <= 128:
        raise ValueError("'trace_id' must be a non-empty string")
    if isinstance(value, bool) or value not in (1, 0, -1):
        raise ValueError("'value' must be 1, 0 or -1")
    if comment is not None and not isinstance(comment, str):
        raise ValueError("'comment' must be a string")
    return FeedbackEvent(
        trace_id=trace_id,
        value=int(value),  # type: ignore[arg-type]
        at=datetime.now(UTC),
        comment=comment[:2000] if comment else None,
    )


class FeedbackDesk:
    """``POST /v1/feedback``: 202 for a trace this gateway served, 404 for any other id."""

    def __init__(
        self,
        *,
        trace_ids: TraceIds,
        metrics: GatewayMetrics,
        dispatcher: TraceDispatcher,
        trace_models: Mapping[str, TraceLabels],
        epoch: Callable[[str], Epoch] = lambda _line: (),
        keys: KeyRing | None = None,
    ) -> None:
        self.keys = keys  # the client keys a voter shows (None: anyone may vote)
        self.trace_ids = trace_ids
        self.metrics = metrics
        self.dispatcher = dispatcher
        self.trace_models = trace_models
        self.epoch = epoch  # a release line's current step (the voice series count per step)
        self.votes = Votes()

    async def handle(self, request: Request) -> Response:
        """Accept one vote (202), or say why not (400, 404; 401 without a client key in keyed
        mode, :mod:`infra.gateway.keyring`)."""
        if self.keys is not None:
            checked = self.keys.check(request.headers.get("authorization"))
            if isinstance(checked, Refusal):
                return refusal_response(checked)
        raw = await request.body()
        # a vote is a flat object: anything else is refused before it is parsed
        if why := await body_shape_problem(raw, max_depth=4, max_containers=FLAT):
            return error_response(400, why, kind="invalid_request_error")
        try:
            event = parse_feedback(orjson.loads(raw))
        except ValueError as exc:  # orjson's errors (nesting past its limit included) are ones
            return error_response(400, str(exc), kind="invalid_request_error")
        if not self.trace_ids.verify(event.trace_id):
            self.metrics.feedback_refused.inc()
            return error_response(
                404,
                "unknown trace id: feedback is taken only for the X-Trace-Id of an answer "
                "from this gateway",
                kind="invalid_request_error",
                code="trace_not_found",
            )
        # only versions this gateway served become labels (a client string would explode
        # cardinality)
        model, line, voter, quota = self.trace_models.get(
            event.trace_id, ("unknown", DEFAULT_WORKLOAD, None, None)
        )
        previous = self.votes.record(event.trace_id, event.value)
        routed = model != PINNED  # a version named by the request is kept out of the series
        if previous is None and routed:  # the voice: the user who was answered, once a step
            self.metrics.vote(
                model=model,
                value=event.value,
                workload=line,
                voter=voter,
                epoch=self.epoch(line),
                quota=quota,
            )
        elif previous is not None and previous != event.value and routed:
            self.metrics.feedback_changed.labels(model).inc()
        if previous != event.value or event.comment:
            self.dispatcher.submit_feedback(event)  # the sink keeps the last vote per trace
        counted = previous is None and routed
        body = {"status": "accepted", "trace_id": event.trace_id, "counted": counted}
        return json_response(body, status=202)
