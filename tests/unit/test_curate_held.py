"""Held rows of k-anonymity in the object store, and the run summary (no Iceberg, no Presidio)."""

from __future__ import annotations

from collections import Counter

from infra.keys import held_key
from infra.store import LocalStore
from tasks.curate.gates import Gated
from tasks.curate.kanon import KDecision, prune_held, read_held, write_held
from tasks.curate.summary import curate_result, summary_markdown


def _held(tid: str, user: str) -> dict:
    return {"trace_id": tid, "user_key": user, "pattern": "p", "window": "w"}


def test_held_rows_are_replaced_per_window_and_pruned_when_released_or_withdrawn(
    tmp_path,
) -> None:
    store = LocalStore(tmp_path)
    write_held(store, window="w1", rows=[_held("b", "u1"), _held("a", "u2")])
    write_held(store, window="w2", rows=[_held("c", "u3")])
    assert [r["trace_id"] for r in read_held(store)] == ["a", "b", "c"]
    assert [r["trace_id"] for r in read_held(store, exclude_window="w1")] == ["c"]

    assert prune_held(store, in_table={"a"}, opted_out={"u3"}) == 2
    assert [r["trace_id"] for r in read_held(store)] == ["b"]
    assert store.list(held_key("w2")) == []  # nothing left held for w2: the object is gone

    write_held(store, window="w1", rows=[])
    assert read_held(store) == []


def test_summary_counts_roles_and_releases() -> None:
    decision = KDecision(
        release=[{"eligible_as": "train"}, {"eligible_as": "rejected_only"}],
        hold=[{"eligible_as": "train"}],
        released_ids=["old"],
        patterns_held=1,
    )
    result = curate_result(
        window="w",
        read=5,
        decision=decision,
        gated=Gated(kept=[], dropped=Counter(duplicate=2)),
        pii=Counter(PERSON=3),
        quarantined=0,
        snapshot_id=7,
        withdrawn=1,
    )
    assert (result.written, result.train, result.rejected_only) == (2, 1, 1)
    assert (result.k_withheld, result.released, result.snapshot_id) == (1, 1, 7)
    markdown = summary_markdown(result)
    assert "| dropped: duplicate | 2 |" in markdown and "| PERSON | 3 |" in markdown
