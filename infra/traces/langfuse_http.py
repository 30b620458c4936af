"""What every client of Langfuse's public HTTP API shares: where and as whom it connects
(:meth:`LangfuseHttp.connection`), and one ``httpx`` client it owns, closed by :meth:`close` or
at the end of a ``with`` block."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

import httpx

if TYPE_CHECKING:
    from infra.settings import LangfuseSettings


class LangfuseHttp:
    """Owns ``self._http`` (set by the subclass); closes it, usable in ``with``."""

    _http: httpx.Client

    @staticmethod
    def connection(lf: LangfuseSettings, role: str) -> dict[str, Any]:
        """The constructor keywords every client takes from ``settings.langfuse``: host, keys,
        page size and timeout.

        Raises:
            ConfigError: a key is missing (the message names ``role`` and the variables).
        """
        public_key, secret_key = lf.credentials(role)
        return {
            "host": lf.host,
            "public_key": public_key,
            "secret_key": secret_key,
            "page_size": lf.page_size,
            "timeout_s": lf.timeout_s,
        }

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
