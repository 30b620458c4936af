"""Client API keys of the gateway's public listener: who a caller is.

A key is shown once, when it is created (``flywheel keys create`` or ``POST /admin/keys``),
and stored only as its SHA-256 digest in ``gateway/keys.json`` (the digest of 32 random
bytes cannot be inverted; a slow password hash would buy nothing for a key nobody chose).
Each entry has a public id (``key_`` and 8 hex digits: what the CLI, the admin API and the
logs name), a name, the workloads it may call (empty: any), a rate limit (requests a minute,
per gateway process; None: none), and how many voices it may add to one release step
(``max_voices``; None: ``FLYWHEEL_GATEWAY__KEY_VOICES_PER_STEP``; 0: no cap). A revoked key
stays in the file with its revocation time, so the gateway stays in keyed mode after the
last key is revoked (every caller then gets 401): only a file that never held a key leaves the
gateway open.

Clients send a key as the openai SDK sends its ``api_key``: ``Authorization: Bearer <key>``.
Writes are compare-and-swap on the file (:mod:`infra.cas`), so two operators creating keys at
once both keep theirs.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import UTC, datetime

import orjson
from pydantic import BaseModel, Field

from infra.cas import compare_and_swap
from infra.errors import ConfigError, ObjectNotFound, PreconditionFailed
from infra.keys import CLIENT_KEYS_KEY
from infra.store import ObjectStore

KEY_PREFIX = "fw-"
KEY_ID = re.compile(r"^key_[0-9a-f]{8}$")
NAME = r"^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,99}$"


class ClientKey(BaseModel):
    """One client key as stored: its digest, never the key."""

    id: str = Field(pattern=KEY_ID.pattern)
    name: str = Field(pattern=NAME)
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    hint: str = Field(max_length=16)  # the key's first characters, to tell keys apart
    workloads: list[str] = []  # empty: any workload
    rate_per_min: int | None = Field(default=None, ge=1)
    max_voices: int | None = Field(default=None, ge=0)  # None: the setting; 0: no cap
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None

    def public(self) -> dict[str, object]:
        """The entry as listed (the digest left out: it names the key to whoever holds it)."""
        return self.model_dump(mode="json", exclude={"digest"})


class ClientKeys(BaseModel):
    """The file ``gateway/keys.json``."""

    keys: list[ClientKey] = []

    def find(self, key_id: str) -> ClientKey | None:
        """The entry with id ``key_id``."""
        return next((k for k in self.keys if k.id == key_id), None)


def digest(key: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key() -> str:
    """A fresh key: ``fw-`` and 43 URL-safe characters (256 random bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def read_keys(store: ObjectStore) -> ClientKeys:
    """The stored keys (none when the file does not exist)."""
    try:
        return ClientKeys.model_validate_json(store.get(CLIENT_KEYS_KEY))
    except ObjectNotFound:
        return ClientKeys()


def _read_versioned(store: ObjectStore) -> tuple[ClientKeys, str | None]:
    try:
        data, etag = store.get_versioned(CLIENT_KEYS_KEY)
    except ObjectNotFound:
        return ClientKeys(), None
    return ClientKeys.model_validate_json(data), etag


def _write(store: ObjectStore, keys: ClientKeys, etag: str | None) -> None:
    body = orjson.dumps(keys.model_dump(mode="json"), option=orjson.OPT_INDENT_2)
    store.put_if(CLIENT_KEYS_KEY, body, etag=etag)


def create_key(
    store: ObjectStore,
    *,
    name: str,
    workloads: list[str] | None = None,
    rate_per_min: int | None = None,
    max_voices: int | None = None,
    now: datetime | None = None,
) -> tuple[ClientKey, str]:
    """A new key: its stored entry and the key itself (shown once, stored nowhere).

    Raises:
        ConfigError: a field out of range (a name with odd characters, a rate under 1).
    """
    secret = new_key()
    try:
        entry = ClientKey(
            id=f"key_{secrets.token_hex(4)}",
            name=name,
            digest=digest(secret),
            hint=secret[: len(KEY_PREFIX) + 4],
            workloads=sorted(set(workloads or [])),
            rate_per_min=rate_per_min,
            max_voices=max_voices,
            created_at=now or datetime.now(UTC),
        )
    except ValueError as exc:
        raise ConfigError(f"invalid key: {exc}") from None

    def decide(found: tuple[ClientKeys, str | None]) -> ClientKeys:
        keys = found[0]
        if any(k.active and k.name == name for k in keys.keys):
            raise ConfigError(f"an active client key is named {name!r}: revoke it or pick another")
        return ClientKeys(keys=[*keys.keys, entry])

    compare_and_swap(
        lambda: _read_versioned(store),
        decide,
        lambda found, keys: _write(store, keys, found[1]),
        operation="client_keys",
        retry_on=(PreconditionFailed,),
    )
    return entry, secret


def revoke_key(store: ObjectStore, key: str, *, now: datetime | None = None) -> ClientKey:
    """Revoke the key with id or name ``key`` (an active one by name; a key already revoked
    keeps its first revocation time).

    Raises:
        ConfigError: no key has that id or name.
    """
    at = now or datetime.now(UTC)

    def target(keys: ClientKeys) -> ClientKey:
        entry = keys.find(key) or next(
            (k for k in keys.keys if k.name == key and k.active),
            next((k for k in keys.keys if k.name == key), None),
        )
        if entry is None:
            raise ConfigError(f"no client key {key!r} (`flywheel keys list` lists them)")
        return entry

    def decide(found: tuple[ClientKeys, str | None]) -> ClientKeys | None:
        keys = found[0]
        entry = target(keys)
        if not entry.active:
            return None
        revoked = entry.model_copy(update={"revoked_at": at})
        return ClientKeys(keys=[revoked if k.id == entry.id else k for k in keys.keys])

    found, _ = compare_and_swap(
        lambda: _read_versioned(store),
        decide,
        lambda found, keys: _write(store, keys, found[1]),
        operation="client_keys",
        retry_on=(PreconditionFailed,),
    )
    entry = target(found[0])
    return entry if not entry.active else entry.model_copy(update={"revoked_at": at})
