"""Settings of governance: how long an erasure may take to reach the models
(``FLYWHEEL_ERASURE__*``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ErasureSettings(BaseModel):
    """``FLYWHEEL_ERASURE__DEADLINE_DAYS``: days from a ``forget-user`` request until no model
    that trained on the user's data may still serve (GDPR: without undue delay)."""

    deadline_days: int = Field(default=7, ge=1)
