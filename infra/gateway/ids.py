"""Random hex ids for the request path (trace nonces, prompt groups, pairings, routing keys).

``uuid.uuid4()`` and ``secrets.token_hex`` each make one ``getrandom`` system call; the gateway
needed two or three per request. Here the same kernel randomness (``os.urandom``) is read
4 KiB at a time and handed out in slices, so the ids stay unpredictable (a trace id's nonce is
what a feedback call must echo) at one system call per few hundred ids. Not thread-safe by
design: the request path runs on one event loop; other threads keep using :mod:`secrets`.
"""

from __future__ import annotations

import os

_POOL_BYTES = 4096


class HexIds:
    """``next(n)``: ``2 * n`` hex characters of fresh kernel randomness."""

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0

    def next(self, nbytes: int = 16) -> str:
        """``2 * nbytes`` random hex characters."""
        if self._at + nbytes > len(self._pool):
            self._pool, self._at = os.urandom(max(_POOL_BYTES, nbytes)), 0
        start, self._at = self._at, self._at + nbytes
        return self._pool[start : self._at].hex()


_IDS = HexIds()


def random_hex(nbytes: int = 16) -> str:
    """``2 * nbytes`` random hex characters (as ``uuid.uuid4().hex`` for 16: same length)."""
    return _IDS.next(nbytes)


PINNED = ""
"""The recorded model of a trace whose version the request named: its feedback stays out of
the routed series (``user_feedback_total``) that the canary's rails and alerts read."""
