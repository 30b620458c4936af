"""The one compare-and-swap of flywheel: read a shared object, decide the change from what was
read, write it only if nobody wrote meanwhile; when somebody did (the write raises one of
``retry_on``), read and decide again. The routing state (every transition, rollback and
restore), the table lease (:mod:`infra.lease`) and curate's dedup index go through
:func:`compare_and_swap`; the waits between tries are :mod:`infra.retries`' backoff, and every
lost race is counted there (``flywheel_retries_total{operation}``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from infra.errors import StateConflict
from infra.retries import Backoff, retry_call

Found = TypeVar("Found")
Change = TypeVar("Change")
Written = TypeVar("Written")

CONFLICTS = Backoff(attempts=8, base_s=0.01, factor=2.0, max_s=0.5)
"""Lost races only: a conflict is cured by reading again, so the first waits are short."""

AT_ONCE = Backoff(attempts=8, base_s=0.0)
"""Lost races read again without waiting (the table lease, the dedup index)."""

DURABLE = Backoff(attempts=6, base_s=0.05, factor=2.0, max_s=1.0)
"""A decision that must be written before it is answered (the gateway's rollback): lost races
and store outages of up to about 1.5 s are waited out, then the caller is told it failed."""


def compare_and_swap(
    read: Callable[[], Found],
    decide: Callable[[Found], Change | None],
    write: Callable[[Found, Change], Written],
    *,
    operation: str,
    policy: Backoff = CONFLICTS,
    retry_on: tuple[type[BaseException], ...] = (StateConflict,),
) -> tuple[Found, Written | None]:
    """``(what was read, what was written)``: ``decide`` turns what ``read`` returned into a
    change (None: nothing to write, the second item is None), and ``write`` writes it on
    condition that the object is still the one read (raising one of ``retry_on`` otherwise:
    ``StateConflict`` for the routing state, ``PreconditionFailed`` for a bare
    :meth:`~infra.store.ObjectStore.put_if`). Every error in ``retry_on`` starts over from
    the read, under ``policy``.

    Raises:
        StateConflict: the state kept changing for ``policy.attempts`` tries (or the last
            error in ``retry_on``).
    """

    def attempt() -> tuple[Found, Written | None]:
        found = read()
        change = decide(found)
        if change is None:
            return found, None
        return found, write(found, change)

    return retry_call(attempt, operation=operation, policy=policy, retry_on=retry_on)
