"""Langfuse 5.x as a trace sink (the gateway's writer side), behind the
:class:`~infra.traces.record.TraceSink` protocol.

It writes what :mod:`infra.traces.langfuse_reader` reads, through the langfuse SDK: one trace per
request (and per diverse-sampling sibling), the gateway's trace id, whose root observation is a
generation with ``input`` = the messages the model was sent, ``output`` = the answer (an
assistant message when it made tool calls), ``model`` and
``version`` = the model version, ``model_parameters`` = temperature/top_p, ``usage_details`` =
input/output tokens, ``metadata`` with the ``META_*`` keys of :mod:`infra.traces.mapping`, user
and session ids via ``propagate_attributes``, and level ERROR when the request had errors.
Feedback is a NUMERIC score ``FEEDBACK_SCORE_NAME`` (1/0/-1) on the trace id. The SDK exports in
its own background thread.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from infra.traces.langfuse_http import LangfuseClient
from infra.traces.mapping import FEEDBACK_SCORE_NAME, generation_metadata

if TYPE_CHECKING:
    from infra.settings import Settings
    from infra.traces.record import FeedbackEvent, TraceRecord


def _output(record: TraceRecord) -> Any:
    if record.tool_calls:
        return {"role": "assistant", "content": record.answer, "tool_calls": record.tool_calls}
    return record.answer


class LangfuseSink(LangfuseClient):
    """Langfuse through its SDK: one ``generation`` observation per trace (the trace id is the
    gateway's), flywheel's extra fields in the metadata; feedback as a ``user_feedback`` score.
    The SDK exports (and retries) in its own background thread."""

    ROLE = "trace sink"

    def __init__(self, settings: Settings) -> None:
        from langfuse import Langfuse

        lf = settings.langfuse
        public_key, secret_key = lf.credentials(self.ROLE)
        self.client = Langfuse(
            public_key=public_key,
            secret_key=secret_key,
            host=lf.host,
            timeout=int(lf.timeout_s),
        )

    def write_trace(self, record: TraceRecord) -> None:
        """Send the trace as one ``generation`` observation under the gateway's trace id (exported
        by the SDK in the background)."""
        from langfuse import propagate_attributes

        with propagate_attributes(user_id=record.user_id, session_id=record.session_id):
            obs = self.client.start_observation(
                trace_context={"trace_id": record.trace_id},
                name="chat",
                as_type="generation",
                input=record.messages,
                output=_output(record),
                model=record.model_version,
                version=record.model_version,
                model_parameters={
                    k: v
                    for k, v in (("temperature", record.temperature), ("top_p", record.top_p))
                    if v is not None
                },
                usage_details={"input": record.tokens_in or 0, "output": record.tokens_out or 0},
                metadata=generation_metadata(record),
                level="ERROR" if record.error_count else None,
            )
        # the observation starts when the sink sees it; its duration is the request's latency
        obs.end(end_time=time.time_ns() + int(record.latency_s * 1e9))

    def write_feedback(self, event: FeedbackEvent) -> None:
        """One ``user_feedback`` score per trace: its id is derived from the trace id, so a
        later vote replaces the earlier one in Langfuse (an upsert) instead of adding one."""
        self.client.create_score(
            score_id=f"{event.trace_id}-{FEEDBACK_SCORE_NAME}",
            trace_id=event.trace_id,
            name=FEEDBACK_SCORE_NAME,
            value=float(event.value),
            data_type="NUMERIC",
            comment=event.comment,
            timestamp=event.at,
        )

    def flush(self) -> None:
        """The SDK batches and exports on its own schedule."""

    @classmethod
    def settings_keywords(cls, settings: Any) -> dict[str, Any]:
        """The sink reads its keys itself: ``LangfuseSink.from_settings(s) == LangfuseSink(s)``."""
        return {"settings": settings}

    def close(self) -> None:
        """Flush what the SDK buffered and stop its exporter thread."""
        self.client.shutdown()
