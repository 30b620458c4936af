"""The client keys on the admin listener (bearer token): ``GET /admin/keys`` lists them (no
key, no digest), ``POST /admin/keys`` creates one and shows it once, ``POST
/admin/keys/{id}/revoke`` revokes one (:mod:`infra.client_keys`; ``flywheel keys`` does the
same from the command line). This gateway checks callers against the change at once, other
gateways within one poll of the store."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field
from starlette.responses import Response

from infra.client_keys import KEY_ID, NAME, create_key, read_keys, revoke_key
from infra.errors import ConfigError
from infra.gateway.chat import json_response
from infra.gateway.parts import ADMIN_ONLY, Parts

router = APIRouter(prefix="/admin", dependencies=ADMIN_ONLY)


class NewKey(BaseModel):
    """The body of ``POST /admin/keys``."""

    name: str = Field(pattern=NAME)
    workloads: list[str] = Field(default=[], max_length=64)
    rate_per_min: int | None = Field(default=None, ge=1)
    max_voices: int | None = Field(default=None, ge=0)


@router.get("/keys")
async def list_keys(p: Parts) -> dict[str, Any]:
    """Every key ever created (revoked ones with their revocation time)."""
    keys = await asyncio.to_thread(read_keys, p.keys.store)
    return {"keys": [k.public() for k in keys.keys]}


@router.post("/keys")
async def post_key(body: NewKey, p: Parts) -> Response:
    """A new key: 201 with the key itself, shown this once (409: an active key has the
    name)."""
    try:
        entry, secret = await asyncio.to_thread(
            lambda: create_key(
                p.keys.store,
                name=body.name,
                workloads=body.workloads,
                rate_per_min=body.rate_per_min,
                max_voices=body.max_voices,
            )
        )
    except ConfigError as exc:
        raise HTTPException(409, str(exc)) from None
    await asyncio.to_thread(p.keys.refresh)
    return json_response({**entry.public(), "key": secret}, status=201)


@router.post("/keys/{key_id}/revoke")
async def post_revoke(key_id: str, p: Parts) -> dict[str, Any]:
    """Revoke a key: its callers get 401 from now on."""
    if not KEY_ID.match(key_id):
        raise HTTPException(404, f"no client key {key_id!r}")
    try:
        entry = await asyncio.to_thread(revoke_key, p.keys.store, key_id)
    except ConfigError as exc:
        raise HTTPException(404, str(exc)) from None
    await asyncio.to_thread(p.keys.refresh)
    return entry.public()
