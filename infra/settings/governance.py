"""Settings of governance: how long an erasure may take to reach the models
(``FLYWHEEL_ERASURE__*``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ErasureSettings(BaseModel):
    """``FLYWHEEL_ERASURE__DEADLINE_DAYS``: days from a ``forget-user`` request until no model
    that trained on the user's data may still serve (GDPR: without undue delay).

    ``LEASE_TTL_S``: how long a hold of the erasure lease (:func:`infra.lease.erasure_lease`)
    lasts unless renewed (holders renew it every third of that; a crashed holder blocks the
    others this long at most). ``LEASE_WAIT_S``: how long ``forget-user`` and ``retention``
    wait for curate runs in flight, and curate for an erasure, before failing with a retry."""

    deadline_days: int = Field(default=7, ge=1)
    lease_ttl_s: float = Field(default=300.0, gt=0)
    lease_wait_s: float = Field(default=3600.0, ge=0)
