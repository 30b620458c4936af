"""One user, one voice: what the canary's tests count per user.

Routing is sticky per user (:mod:`infra.gateway.cohorts`), so one user's requests, errors and
votes all land on one version, and they are not independent of each other: a user who votes
every answer down, a script that retries a failing request, one heavy client. Counted per
request, one such user could vote a canary down trace by trace, or make a step look ten times
worse than it is. The canary's error and feedback tests therefore count users, not events:

- ``agent_voices_total{model,route,workload}``: users served by a version in the current step
  of their release line (each user's first ``cap`` requests);
- ``agent_error_voices_total{model,route,workload}``: users whose request failed (each user's
  first ``cap`` failures);
- ``user_feedback_voices_total{model,value,workload}``: each user's first ``cap`` votes;
- ``agent_slow_voices_total{model,route,workload,over}``: users who had a request slower than
  ``over`` seconds (each latency bound), once per bound: the p99 rail's unit
  (:mod:`tasks.release.canary.latency`), where a user whose own requests are slow is one user.

``cap`` is ``FLYWHEEL_GATEWAY__VOICES_PER_STEP`` (default 1: the error test compares the share
of users who met an error, the feedback test one vote per user, and the tests' independence
assumption holds at the user). A user is the key the request was routed by
(:func:`infra.gateway.requester.request_key`): its ``user`` (OpenAI's field), else its session,
else its client's address (the peer, or the client a trusted proxy names), so each voice met
one version only. Clients without ``user`` behind one proxy that is not configured as trusted
share a voice. The key is a keyed 64-bit hash held in memory only, never exported or logged.

A *step* is one state of the release line (its release id, candidate, phase, weight and step):
when the routing state moves a line on, that line's ledger starts again, so each canary step
hears every user afresh. The raw series (``agent_requests_total``, ``agent_errors_total``,
``user_feedback_total``) still count every event, for dashboards and alert rules. Memory is
bounded (``MAX_KEYS`` users per line; past it, new users are not counted as voices and
``flywheel_voices_dropped_total`` says so). With client keys, each key adds to a version in a
step at most as many users who met an error, and as many votes, as the other keys' users that
version served in the step, or its cap where that is more (:mod:`infra.gateway.keyring`; the
rest are counted in ``flywheel_voices_capped_total``): one key cannot outvote the others
unless it is the only client. Users served are counted in full, so the step's split (sample
ratio) and its minimum of users see every key's users. Several gateway processes keep one
ledger each: a user spread over N processes counts up to N times.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from infra.routing import RoutingState

MAX_KEYS = 200_000  # (user, version, kind) entries per release line and step

Epoch = tuple[object, ...]
Admission = Literal["counted", "repeat", "dropped", "anonymous", "capped"]
Quota = tuple[str, int]  # (client key id, voices it may add per version, kind and step)


def epoch_of(view: RoutingState) -> Epoch:
    """The step a release line is in: anything that changes it starts the line's votes anew."""
    return (view.release_id, view.candidate, view.phase, view.weight, view.step, view.stable)


class VoiceLedger:
    """Per release line and step: how many requests, errors and votes each user has had
    counted, so each counts at most ``cap`` times (see the module docstring)."""

    def __init__(self, *, cap: int = 1, max_keys: int = MAX_KEYS) -> None:
        self.cap = cap
        self.max_keys = max_keys
        self._key = os.urandom(16)  # per process: the hashes mean nothing outside it
        self._lines: dict[str, tuple[Epoch, dict[tuple[int, str, str], int]]] = {}
        # per line: voices each client key added in the step, per (key id, model, kind)
        self._quotas: dict[str, dict[tuple[str, str, str], int]] = {}
        # per line: the latency bounds each served (voter, model, route) was counted over
        self._slow: dict[str, dict[tuple[int, str, str], int]] = {}
        self.dropped = 0

    def voter(self, key: str | None) -> int | None:
        """The in-memory key of a requester from its request key (None: it has none)."""
        if not key:
            return None
        digest = hashlib.blake2b(key.encode(), key=self._key, digest_size=8).digest()
        return int.from_bytes(digest, "big")

    def admit(
        self,
        *,
        line: str,
        epoch: Epoch,
        voter: int | None,
        model: str,
        kind: str,
        quota: Quota | None = None,
    ) -> Admission:
        """Whether this event of ``voter`` counts as a voice (``kind``: request, error or
        feedback) for ``model`` in ``line``'s current step (``counted``); counts it when it
        does. ``repeat``: the voter had its say in this step; ``dropped``: a new voter the
        ledger had no room for (also counted in ``dropped``); ``anonymous``: no voter, which
        never counts as a voice; ``capped``: a new error or vote of a client key (``quota``:
        its id and cap, :mod:`infra.gateway.keyring`) that already added as many of this kind
        to ``model`` in the step as the other keys' users ``model`` served (at least its
        cap)."""
        if voter is None:
            return "anonymous"
        seen = self._step(line, epoch)
        key = (voter, model, kind)
        n = seen.get(key, 0)
        if n >= self.cap:
            return "repeat"
        admission = self._new(seen, n, line=line, model=model, kind=kind, quota=quota)
        if admission == "counted":
            seen[key] = n + 1
        return admission

    def slower(
        self,
        *,
        line: str,
        epoch: Epoch,
        voter: int | None,
        model: str,
        route: str,
        over: int,
        quota: Quota | None = None,
    ) -> tuple[Admission, range]:
        """The latency bounds (their indices) this request of ``voter`` is the user's first in
        the step to be slower than, ``over`` being how many bounds it is slower than: each user
        counts once per bound and step (``agent_slow_voices_total``), whatever the number of
        their slow requests. Only a user counted as served on ``route`` (:meth:`admit` first)
        has slow voices, kept beside that entry (no room of their own); a client key's quota
        applies to a user's first slow request."""
        if voter is None or over <= 0:
            return "anonymous", range(0)
        key = (voter, model, route)
        if key not in self._step(line, epoch):  # not counted as served: dropped, or capped
            return "repeat", range(0)
        slow = self._slow[line]
        had = slow.get(key, 0)
        if over <= had:
            return "repeat", range(0)
        if had == 0 and quota is not None:
            admission = self._quota(line, model, "slow:" + route, quota)
            if admission != "counted":
                return admission, range(0)
        slow[key] = over
        return "counted", range(had, over)

    def _step(self, line: str, epoch: Epoch) -> dict[tuple[int, str, str], int]:
        """``line``'s ledger for its step ``epoch`` (a new step starts it anew)."""
        current = self._lines.get(line)
        if current is None or current[0] != epoch:
            current = self._lines[line] = (epoch, {})
            self._quotas[line], self._slow[line] = {}, {}
        return current[1]

    def _new(
        self,
        seen: dict[tuple[int, str, str], int],
        n: int,
        *,
        line: str,
        model: str,
        kind: str,
        quota: Quota | None,
    ) -> Admission:
        """Whether a voice the voter has not yet had fits: the ledger's room (for a new
        entry, ``n`` 0) and its client key's quota."""
        if n == 0 and len(seen) >= self.max_keys:
            self.dropped += 1
            return "dropped"
        return "counted" if quota is None else self._quota(line, model, kind, quota)

    def _quota(self, line: str, model: str, kind: str, quota: Quota) -> Admission:
        """Whether a client key's quota takes one more voice of ``kind`` for ``model``."""
        added = self._quotas.setdefault(line, {})
        if kind == "feedback" or kind.startswith(("error:", "slow:")):  # what the tests weigh
            # at most as many as the other keys' users served by this version in the step,
            # and at least the cap: no key outvotes the rest unless it is alone
            mine = added.get((quota[0], model, kind), 0)
            others = added.get(("", model, "served"), 0) - added.get((quota[0], model, "served"), 0)
            if mine >= max(quota[1], others):
                return "capped"
            added[(quota[0], model, kind)] = mine + 1
        else:  # users served: counted in full (the split and the minimum read them)
            for who in (quota[0], ""):
                added[(who, model, "served")] = added.get((who, model, "served"), 0) + 1
        return "counted"
