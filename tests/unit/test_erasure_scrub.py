"""Scrubbing an object races the writers that append to it (issue 52, item 6): the scrub is
a compare-and-swap, so a line a writer added between the scrub's read and its write survives,
and is itself scrubbed when it is the forgotten user's (never overwritten blindly)."""

from __future__ import annotations

import json
from pathlib import Path

from infra.privacy import user_key
from infra.store import LocalStore
from tasks.governance.erasure import scrub_objects

SALT = "test-salt"
KEY = user_key("alice@example.com", SALT)
SPOOL = "traces/dt=2026-03-02/hour=09/gw-000001.jsonl"


def line(trace_id: str, user: str, question: str) -> str:
    return json.dumps({"type": "trace", "trace_id": trace_id, "user_id": user, "q": question})


class RacingStore(LocalStore):
    """A store where a writer rewrites ``key`` right after the scrub first reads it."""

    def __init__(self, root: Path, key: str, after_read: bytes) -> None:
        super().__init__(root)
        self.key, self.after_read, self.raced = key, after_read, False

    def _race(self, key: str) -> None:
        if key == self.key and not self.raced:
            self.raced = True
            self.put(key, self.after_read)

    def get(self, key: str) -> bytes:
        data = super().get(key)
        self._race(key)
        return data

    def get_versioned(self, key: str) -> tuple[bytes, str]:
        found = super().get_versioned(key)
        self._race(key)
        return found


def scrub(store: LocalStore) -> tuple[int, int]:
    return scrub_objects(store, key=KEY, salt=SALT, trace_ids={"t-a1"}, skip_prefix=None)


def lines_of(store: LocalStore) -> list[str]:
    return [json.loads(x)["trace_id"] for x in store.get(SPOOL).decode().splitlines()]


def test_a_line_written_during_the_scrub_is_kept_and_scrubbed_too(tmp_path: Path) -> None:
    first = [line("t-a1", "alice@example.com", "my card is 4111"), line("t-b1", "bob", "hi")]
    later = [*first, line("t-b2", "bob", "again"), line("t-a2", "alice@example.com", "me")]
    store = RacingStore(tmp_path, SPOOL, ("\n".join(later) + "\n").encode())
    store.put(SPOOL, ("\n".join(first) + "\n").encode())

    assert scrub(store) == (1, 0)

    assert store.raced and lines_of(store) == ["t-b1", "t-b2"]  # bob's new line, no alice


def test_an_object_emptied_by_the_scrub_is_not_deleted_under_a_new_line(tmp_path: Path) -> None:
    only_alice = line("t-a1", "alice@example.com", "call me")
    after = [only_alice, line("t-b3", "bob", "new")]
    store = RacingStore(tmp_path, SPOOL, ("\n".join(after) + "\n").encode())
    store.put(SPOOL, (only_alice + "\n").encode())

    scrub(store)

    assert lines_of(store) == ["t-b3"]
