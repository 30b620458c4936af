"""``POST /admin/consent`` on the admin listener (bearer token): record a user's consent to
training. The body names the user by raw id (hashed here with the configured salt, never
stored or logged) or by salted key; the response carries the key only."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field, model_validator

from infra.consent import record_consent
from infra.privacy import user_key

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

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


def add_consent_routes(
    router: APIRouter, *, catalog: Callable[[], Catalog], salt: Callable[[], str], mode: str
) -> None:
    """Add the consent route to the admin router (prefix and token check come with it);
    ``catalog``, ``salt`` and the consent ``mode`` are the admin's (no import back into :mod:`infra.gateway.admin`)."""

    @router.post("/consent")
    async def post_consent(body: ConsentRequest) -> dict[str, Any]:
        key = body.user_key or user_key(body.user_id or "", salt())
        try:
            at = await asyncio.to_thread(
                lambda: record_consent(catalog(), key=key, granted=body.granted, actor="admin-api")
            )
        except Exception as exc:  # the catalog is down: say so, never the user id
            raise HTTPException(503, f"consent not recorded: {type(exc).__name__}") from exc
        return {
            "user_key": key,
            "granted": body.granted,
            "at": at.isoformat(),
            "mode": mode,
        }
