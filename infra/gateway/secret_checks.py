"""The gateway's checks of its own secrets at start: the admin token and the user salt must
not be placeholders or short (a guessable one undoes what it protects)."""

from __future__ import annotations

from pydantic import SecretStr

from infra.errors import ConfigError

MIN_TOKEN_CHARS = 32
MIN_SALT_CHARS = 16
_PLACEHOLDERS = ("changeme", "change-me", "change_me", "placeholder", "example", "your-")


def check_admin_token(token: SecretStr | None) -> None:
    """Refuse a placeholder or short admin token (unset or empty: the admin API is off).

    Raises:
        ConfigError: the token is a placeholder, repetitive, or under 32 characters.
    """
    value = token.get_secret_value() if token is not None else ""
    if value:
        _check_secret(
            "FLYWHEEL_GATEWAY__ADMIN_TOKEN",
            value,
            minimum=MIN_TOKEN_CHARS,
            how="set a random one, e.g. `openssl rand -hex 32`",
        )


def _check_secret(name: str, value: str, *, minimum: int, how: str) -> None:
    """Refuse a placeholder (a known word, < 8 distinct characters) or a value too short."""
    if any(p in value.lower() for p in _PLACEHOLDERS) or len(set(value)) < 8:
        raise ConfigError(f"{name} is a placeholder: {how}")
    if len(value) < minimum:
        raise ConfigError(
            f"{name} has {len(value)} characters, the gateway needs at least {minimum}: {how}"
        )


def check_user_salt(salt: SecretStr | None) -> None:
    """Refuse a placeholder or short ``FLYWHEEL_USER_SALT`` (unset: one is generated). The salt
    keys user pseudonyms and signs trace ids: a guessable one undoes both.

    Raises:
        ConfigError: the salt is a placeholder, repetitive, or under 16 characters.
    """
    if salt is None:
        return
    _check_secret(
        "FLYWHEEL_USER_SALT",
        salt.get_secret_value(),
        minimum=MIN_SALT_CHARS,
        how="set a random one, e.g. `openssl rand -hex 32`, or unset it to have one generated",
    )
