"""Langfuse as trace source and sink (``FLYWHEEL_LANGFUSE__*``); part of
:class:`infra.settings.Settings`."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr

from infra.errors import ConfigError


class LangfuseSettings(BaseModel):
    """Langfuse as trace source/sink (production)."""

    host: str = "http://localhost:3000"
    public_key: SecretStr | None = None
    secret_key: SecretStr | None = None
    page_size: int = 100
    page_retries: int = 4
    timeout_s: float = 30.0

    def credentials(self, role: str) -> tuple[str, str]:
        """(public key, secret key) for Langfuse as ``role`` (e.g. "trace source").

        Raises:
            ConfigError: a key is missing; the message names both variables and the host.
        """
        if self.public_key is None or self.secret_key is None:
            raise ConfigError(
                f"{role} 'langfuse' needs API keys: set FLYWHEEL_LANGFUSE__PUBLIC_KEY and "
                "FLYWHEEL_LANGFUSE__SECRET_KEY (Langfuse UI -> Settings -> API keys), and "
                f"FLYWHEEL_LANGFUSE__HOST (now {self.host})"
            )
        return self.public_key.get_secret_value(), self.secret_key.get_secret_value()
