"""Diverse sampling's temperatures: the caller's own temperature answers the user, the other
siblings spread from it by the configured steps.

``FLYWHEEL_GATEWAY__DIVERSE_TEMPERATURES`` (default ``[0.7, 0.9, 1.1]``) gives the spread: a
request without a temperature is answered at the first value and its siblings run at the
others, as configured. A request with its own temperature ``t`` is answered at ``t`` (a
``temperature: 0`` caller gets its deterministic answer) and each sibling runs at ``t`` plus
that sibling's step from the first configured value (``0 -> 0, 0.2, 0.4``); a step that would
leave ``[0, 2]`` (OpenAI's range) is taken downwards instead, then clamped.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_TEMPERATURE = 2.0


def sibling_temperatures(requested: float | None, configured: Sequence[float]) -> list[float]:
    """The temperatures of one prompt group, the user's first."""
    if not configured:
        return [] if requested is None else [requested]
    if requested is None:
        return list(configured)
    temps = [requested]
    for value in configured[1:]:
        step = value - configured[0]
        spread = requested + step
        if not 0.0 <= spread <= MAX_TEMPERATURE:
            spread = requested - step
        temps.append(round(min(max(spread, 0.0), MAX_TEMPERATURE), 6))
    return temps
