"""Per-trace audit (issue 17): one audit row per anonymised trace with entity types and counts
(never values), per quarantined and per held trace with the reason; a rerun replaces them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from infra.catalog import open_catalog, scan
from infra.settings import get_settings
from infra.store import open_store
from tests.data.pii_corpus import generate, plant_window

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def _trace_events() -> list[dict]:
    rows = scan(open_catalog(get_settings()), "audit_log").to_pylist()
    return sorted((r for r in rows if r["actor"] == "curate.trace"), key=lambda r: r["subject"])


def test_one_row_per_trace_without_values_and_reruns_replace(prefect_api, flywheel_home):
    from flows.curate import curate

    settings = get_settings()
    corpus = generate(30, seed=5, family="heldout")
    common = [(f"What is {a}+{a + 7}?", f"user-{a % 9}") for a in range(10, 28)]
    planted = plant_window(open_store(settings), T0, [*corpus, *common], users=9, unscored=2)
    result = curate(window_start=T0)
    events = _trace_events()
    kinds = {e["event_type"] for e in events}
    assert kinds == {"curate.trace_anonymised", "curate.trace_held", "curate.trace_quarantined"}
    by_kind = {k: [e for e in events if e["event_type"] == k] for k in kinds}
    assert len(by_kind["curate.trace_anonymised"]) == result.written
    assert len(by_kind["curate.trace_held"]) == result.k_withheld
    assert len(by_kind["curate.trace_quarantined"]) == result.quarantined == 2
    assert len({e["subject"] for e in events}) == len(events)
    everything = " ".join(e["details"] for e in events)
    for labels in planted.labels.values():
        for _kind, value in labels:
            assert value not in everything
    found = [json.loads(e["details"]) for e in by_kind["curate.trace_anonymised"]]
    # the released traces whose tool results carried a planted identifier say which types
    assert any(d["entities"].get("US_SSN") or d["entities"].get("IBAN_CODE") for d in found)
    assert all(d["found"] == sum(d["entities"].values()) for d in found)
    assert all(
        "score" in json.loads(e["details"])["reason"] for e in by_kind["curate.trace_quarantined"]
    )

    curate(window_start=T0)
    again = _trace_events()
    assert [(e["subject"], e["event_type"], e["details"]) for e in again] == [
        (e["subject"], e["event_type"], e["details"]) for e in events
    ]
