"""``POST /admin/consent`` on the admin listener (bearer token): records a user's consent to
training. The body names the user by raw id (hashed here with the configured salt, never
stored or logged) or by salted key; the response carries the key only."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field, model_validator

from infra.consent import record_consent
from infra.gateway.parts import ADMIN_ONLY, Parts
from infra.privacy import user_key

_KEY = re.compile(r"^[0-9a-f]{64}$")


class ConsentRequest(BaseModel):
    """The body of ``POST /admin/consent``: exactly one of ``user_id`` and ``user_key``, and whether
    the user consents."""

    user_id: str | None = Field(default=None, min_length=1, max_length=512)
    user_key: str | None = Field(default=None, pattern=_KEY.pattern)
    granted: bool

    @model_validator(mode="after")
    def _one_user(self) -> ConsentRequest:
        if (self.user_id is None) == (self.user_key is None):
            raise ValueError("give exactly one of user_id and user_key")
        return self


router = APIRouter(prefix="/admin", dependencies=ADMIN_ONLY)


@router.post("/consent")
async def post_consent(body: ConsentRequest, p: Parts) -> dict[str, Any]:
    """Record the user's consent (or its withdrawal); 503 when the catalog is down."""
    settings = p.admin.settings
    key = body.user_key or user_key(body.user_id or "", settings.salt())
    try:
        at = await asyncio.to_thread(
            lambda: record_consent(
                p.admin.catalog(), key=key, granted=body.granted, actor="admin-api"
            )
        )
    except Exception as exc:  # the catalog is down: say so, never the user id
        raise HTTPException(503, f"consent not recorded: {type(exc).__name__}") from exc
    return {
        "user_key": key,
        "granted": body.granted,
        "at": at.isoformat(),
        "mode": settings.consent_mode,
    }
