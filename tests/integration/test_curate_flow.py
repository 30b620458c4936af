"""Stage 3 through a real Prefect run on a labelled corpus: no planted value survives into
training_examples, reruns and a run killed before its commit leave identical contents,
consent, gates, rejected-only siblings, quarantine, metrics and the audit trail."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta

import pytest

from infra.catalog import append_rows, open_catalog, scan
from infra.privacy import user_key
from infra.settings import get_settings
from infra.store import open_store
from tests.data.pii_corpus import generate, plant_window, value_gone

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
W0 = "2026-11-22T10:00:00Z"
HARD_KINDS = ("EMAIL", "PHONE", "CARD", "SSN", "IBAN", "ACCOUNT")


def _run(start: datetime = T0):
    from flows.curate import curate

    return curate(window_start=start)


def _rows(settings) -> list[dict]:
    rows = scan(open_catalog(settings), "training_examples").to_pylist()
    return sorted(rows, key=lambda r: r["trace_id"])


def _row_text(row: dict) -> str:
    return " ".join([row["question"], row["answer"], *row["contexts"]])


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def test_no_planted_value_reaches_training_examples(prefect_api, flywheel_home, monkeypatch):
    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")  # every row reaches the table
    get_settings.cache_clear()
    settings = get_settings()
    planted = plant_window(open_store(settings), T0, generate(120, seed=7, family="heldout"))
    result = _run()
    rows = _rows(settings)
    assert result.written == len(rows) > 200
    labels = {tid: planted.labels[tid] for tid in (r["trace_id"] for r in rows)}
    everything = " ".join(_row_text(r) for r in rows)
    names, names_gone, hard = 0, 0, 0
    for row in rows:
        text = _row_text(row)
        for kind, value in labels[row["trace_id"]]:
            if kind in HARD_KINDS:
                hard += 1
                assert value not in everything, f"{kind} survived anonymisation"
                if kind != "EMAIL" and len(_digits(value)) >= 6:
                    assert _digits(value) not in _digits(text), f"{kind} digits survived"
            elif kind == "PERSON":
                names += 1
                names_gone += value_gone(kind, value, text)
    assert hard > 300 and names > 100
    assert names_gone / names >= 0.90, f"person-name recall {names_gone / names:.3f}"
    found = set(result.pii_entities)
    assert {"EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IBAN_CODE"} <= found
    assert "BANK_ACCOUNT" in found and "PERSON" in found
    assert all(set(r["pii_entities"]) <= found for r in rows)
    assert any("<EMAIL_ADDRESS>" in r["question"] for r in rows)


def test_rerun_and_kill_before_commit_leave_identical_contents(
    prefect_api, flywheel_home, monkeypatch
):
    settings = get_settings()
    common = [(f"What is {a}+{a + 7}?", f"user-{a % 10}") for a in range(10, 40)]
    plant_window(open_store(settings), T0, [*generate(40, seed=3), *common], users=6)
    first = _run()
    before = _rows(settings)
    assert before and first.written == len(before)
    held_before = open_store(settings).list("curate/held/")
    assert first.k_withheld > 0 and held_before  # rare questions held, common ones written

    _run()
    assert _rows(settings) == before

    import tasks.curate.commit

    def killed(*args, **kwargs):
        raise RuntimeError("killed after anonymisation, before the commit")

    monkeypatch.setattr(tasks.curate.commit, "commit_examples", killed)
    with pytest.raises(RuntimeError, match="killed"):
        _run()
    monkeypatch.undo()
    assert _rows(settings) == before
    _run()
    after = _rows(settings)
    assert after == before
    ids = [r["trace_id"] for r in after]
    assert len(ids) == len(set(ids))
    assert open_store(settings).list("curate/held/") == held_before


def test_gates_consent_roles_and_quarantine(prefect_api, flywheel_home, monkeypatch):
    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")
    get_settings.cache_clear()
    settings = get_settings()
    store = open_store(settings)
    planted = plant_window(store, T0, generate(30, seed=5), users=5, unscored=2)
    opted = user_key("user-2", settings.salt())
    append_rows(
        open_catalog(settings),
        "consent",
        [
            {"user_key": opted, "consent_to_training": True, "updated_at": T0},
            {"user_key": opted, "consent_to_training": False, "updated_at": T0 + timedelta(1)},
        ],
    )
    result = _run()
    rows = _rows(settings)
    assert opted not in {r["user_key"] for r in rows}
    assert result.dropped["opted_out"] == planted.by_user["user-2"] - planted.unscored_of("user-2")
    assert {r["user_key"] for r in rows} <= {
        user_key(f"user-{i}", settings.salt()) for i in range(5)
    }
    assert all(r["reward"] >= 0.7 for r in rows if r["eligible_as"] == "train")
    rejected = [r for r in rows if r["eligible_as"] == "rejected_only"]
    assert rejected and all(r["reward"] < 0.7 for r in rejected)
    train_groups = {r["prompt_group"] for r in rows if r["eligible_as"] == "train"}
    assert all(r["prompt_group"] in train_groups for r in rejected)
    assert result.dropped["errors"] == planted.flagged("errors", excluding_user="user-2")
    assert result.dropped["latency"] == planted.flagged("latency", excluding_user="user-2")
    assert result.dropped["duplicate"] >= 1

    q = scan(open_catalog(settings), "quarantine").to_pylist()
    assert result.quarantined == len(q) == 2
    dump = json.dumps(q, default=str)
    assert all(v not in dump for tid in planted.unscored for _k, v in planted.labels[tid])

    events = scan(open_catalog(settings), "audit_log").to_pylist()
    kinds = {e["event_type"]: json.loads(e["details"]) for e in events}
    assert kinds["curate.dropped"]["opted_out"] == result.dropped["opted_out"]
    assert kinds["curate.pii_found"] == result.pii_entities
    assert "k_withheld" in {k.removeprefix("curate.") for k in kinds}
    assert all(
        v not in json.dumps(events, default=str) for ls in planted.labels.values() for _k, v in ls
    )

    metrics = json.loads(store.get("metrics/curate.json"))["counters"]
    pii_series = metrics["flywheel_pii_entities_total"]
    assert sum(pii_series.values()) == sum(result.pii_entities.values()) > 0
    outcomes = " ".join(metrics["flywheel_stage_records_total"])
    assert "dropped_opted_out" in outcomes and "dropped_low_reward" in outcomes or rejected


def test_small_groups_are_held_back_then_released(prefect_api, flywheel_home):
    settings = get_settings()
    store = open_store(settings)
    rng = random.Random(1)
    rare = "My parrot Quetzalcoatl wants to know: what is {a} times {b}?"
    common = "What is {a}+{b}?"

    def window(start: datetime, rare_users: range) -> None:
        items = [
            (common.format(a=rng.randint(10, 99), b=rng.randint(10, 99)), f"u{i}") for i in range(6)
        ]
        items += [
            (rare.format(a=rng.randint(10, 99), b=rng.randint(10, 99)), f"r{i}") for i in rare_users
        ]
        plant_window(store, start, items)

    window(T0, range(0, 3))
    first = _run(T0)
    assert first.k_withheld == 9 and first.released == 0  # 3 users x 3 sampled answers
    assert not any("parrot" in r["question"] for r in _rows(settings))
    held = store.list("curate/held/")
    assert held == [f"curate/held/window={W0}/held.parquet"]
    # the golden set covers the additions, not the parrot's multiplications; a held-back
    # prompt is never shown as the uncovered cluster's example
    ((workload, coverage),) = first.coverage.items()
    assert (coverage["prompts"], coverage["coverage"]) == (27, pytest.approx(18 / 27))
    (cluster,) = coverage["clusters"]
    assert cluster["size"] == 9 and "times" in cluster["terms"] and cluster["example"] is None
    stored = json.loads(store.get(f"curate/coverage/{workload}.json"))
    assert stored["coverage"] == pytest.approx(18 / 27) and "parrot" not in json.dumps(stored)
    gauges = json.loads(store.get("metrics/curate.json"))["gauges"]
    assert "flywheel_golden_coverage" in gauges

    t1 = T0 + timedelta(hours=1)
    window(t1, range(3, 5))
    second = _run(t1)
    assert second.released == 9 and second.k_withheld == 0
    rows = _rows(settings)
    parrots = [r for r in rows if "parrot" in r["question"]]
    assert len(parrots) == 15 and {r["window"] for r in parrots} == {W0, "2026-11-22T11:00:00Z"}
    (cluster,) = next(iter(second.coverage.values()))["clusters"]
    assert "parrot" in cluster["example"]  # released now: k users asked it
    assert store.list("curate/held/") == []
    _run(t1)
    _run(T0)
    assert _rows(settings) == rows


def test_withdrawn_consent_reaches_held_rows_and_earlier_windows(prefect_api, flywheel_home):
    settings = get_settings()
    store = open_store(settings)
    rare = "My parrot Quetzalcoatl wants to know: what is {a} times {b}?"
    items = [(f"What is {a}+{a}?", f"u{a % 6}") for a in range(10, 22)]
    plant_window(store, T0, items + [(rare.format(a=i, b=i), f"r{i}") for i in range(3)])
    _run(T0)
    salt = settings.salt()
    now = datetime.now(UTC)
    withdrawn = [user_key(u, salt) for u in ("u0", "r0")]
    append_rows(
        open_catalog(settings),
        "consent",
        [{"user_key": k, "consent_to_training": False, "updated_at": now} for k in withdrawn],
    )
    t1 = T0 + timedelta(hours=1)
    plant_window(store, t1, [(rare.format(a=i, b=i), f"r{i}") for i in range(3, 6)])
    result = _run(t1)
    rows = _rows(settings)
    assert not {r["user_key"] for r in rows} & set(withdrawn)
    assert result.withdrawn == 2 * 3  # u0 asked twice, three sampled answers each
    parrot_users = {r["user_key"] for r in rows if "parrot" in r["question"]}
    assert parrot_users == {user_key(f"r{i}", salt) for i in (1, 2, 3, 4, 5)}
    assert store.list("curate/held/") == []  # r0's held rows are gone, not kept for later
