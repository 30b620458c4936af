"""Pseudonymous user keys: what every table stores instead of a raw user id."""

from __future__ import annotations

import hashlib


def user_key(user_id: str, salt: str) -> str:
    """The salted user key: sha256 hex of ``salt + user_id`` (stable per salt, not reversible
    without the salt)."""
    return hashlib.sha256((salt + user_id).encode("utf-8")).hexdigest()
