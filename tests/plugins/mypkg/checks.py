"""Verifiers a user might write: ``exact_json`` checks that the answer is the JSON object the
first context holds (key order and spacing do not matter)."""

from __future__ import annotations

import json
from typing import Any


def exact_json(trace: Any) -> dict[str, Any] | None:
    """1.0 when the answer parses to the same JSON value as the first context, 0.0 when it
    does not (or is not JSON), None without a context to compare with; the expected JSON is
    the reference."""
    if not trace.contexts:
        return None
    expected = json.loads(trace.contexts[0])
    try:
        got = json.loads(trace.answer)
    except ValueError:
        got = object()
    return {"score": 1.0 if got == expected else 0.0, "reference": trace.contexts[0]}
