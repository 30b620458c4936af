"""What every client of Langfuse's public HTTP API shares: one ``httpx`` client it owns, closed
by :meth:`close` or at the end of a ``with`` block."""

from __future__ import annotations

from typing import Self

import httpx


class LangfuseHttp:
    """Owns ``self._http`` (set by the subclass); closes it, usable in ``with``."""

    _http: httpx.Client

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
