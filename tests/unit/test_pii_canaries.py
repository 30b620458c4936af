"""The canaries of a curate run (issue 43), without the anonymiser: every run draws new people
in every shape and type, a seed replays them, a value counts as surviving however its
separators or case changed (and a name by either word), the check takes canaries out of the
batch and its quarantine, and the recall gauge of a run replaces the previous run's."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from datetime import UTC, datetime

import pytest

from infra.metrics.stage import StageReport, _fold
from tasks.curate.canaries import Canary, CanaryBatch, CanaryValue, plant, run_seed, survives
from tasks.curate.canary_check import RECALL_METRIC, check_canaries

AT = datetime(2026, 11, 22, 10, tzinfo=UTC)
EN = {"PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "US_SSN", "CREDIT_CARD", "DATE_OF_BIRTH"}
EN |= {"BANK_ACCOUNT"}
KO = {"PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "KR_RRN", "KR_CAR_PLATE", "DATE_OF_BIRTH"}


def batch(seed: int, languages: tuple[str, ...] = ("en", "ko")) -> CanaryBatch:
    canaries = plant(list(languages), per_language=16, seed=seed, window="w", at=AT)
    return CanaryBatch(seed=seed, canaries=canaries)


def texts(row: dict) -> list[str]:
    messages = json.loads(row["messages"])
    return [m["content"] for m in messages if isinstance(m.get("content"), str)]


def test_every_run_plants_new_people_and_a_seed_replays_them() -> None:
    first, second = batch(run_seed(None)), batch(run_seed(None))
    assert first.seed != second.seed
    phones = [
        {v.value for c in b.canaries for v in c.values if v.entity_type == "PHONE_NUMBER"}
        for b in (first, second)
    ]
    assert len(phones[0]) >= 20 and not phones[0] & phones[1]
    again = batch(first.seed)
    assert [v for c in again.canaries for v in c.values] == [
        v for c in first.canaries for v in c.values
    ]
    assert run_seed(42) == 42


def test_each_language_gets_every_type_in_every_shape_a_few_dozen_records() -> None:
    planted = batch(7).canaries
    assert len(planted) == 32
    types = {
        lang: {v.entity_type for c in planted for v in c.values if v.language == lang}
        for lang in ("en", "ko")
    }
    assert types == {"en": EN, "ko": KO}
    results = [c.row["contexts"][0] for c in planted if c.row["contexts"]]
    shapes = Counter()
    for result in results:
        if result.startswith("{"):
            json.loads(result)  # the JSON tool result is valid JSON
            shapes["json"] += 1
        elif result.startswith("order_id,"):
            header, row = list(csv.reader(io.StringIO(result)))
            assert len(header) == len(row) and "name" in header
            shapes["csv"] += 1
        else:
            assert all("=" in line for line in result.splitlines())
            shapes["kv"] += 1
    assert shapes == {"json": 8, "csv": 8, "kv": 8}
    assert sum(1 for c in planted if not c.row["contexts"]) == 8  # free text
    for canary in planted:  # each planted value is in its record as written
        everything = " ".join([*texts(canary.row), *canary.row["contexts"]])
        assert all(survives(v, [everything]) for v in canary.values)
        assert canary.trace_id.startswith("canary-") and canary.row["eligible_as"] == "train"


def test_only_the_planted_value_can_survive() -> None:
    """No word of a canary's name is in the words around it: once each value is replaced,
    nothing of the canary is left (a surviving word is always the value)."""
    for seed in range(20):
        for canary in batch(seed).canaries:
            replaced = _anonymised(canary, {v.entity_type for v in canary.values})
            assert not any(survives(v, _all_texts(replaced)) for v in canary.values)


def _all_texts(row: dict) -> list[str]:
    return [row["question"], row["answer"], *row["contexts"], *texts(row)]


@pytest.mark.parametrize(
    ("value", "text", "left"),
    [
        (CanaryValue("en", "PHONE_NUMBER", "(212) 555-0142"), "call 212.555.0142", True),
        (CanaryValue("en", "PHONE_NUMBER", "(212) 555-0142"), "call <PHONE_NUMBER>", False),
        (CanaryValue("en", "EMAIL_ADDRESS", "Ann.Lee@example.org"), "ann.lee@EXAMPLE.org", True),
        (CanaryValue("en", "PERSON", "Ann Leeds", ("Ann", "Leeds")), "Mrs <PERSON>", False),
        (CanaryValue("en", "PERSON", "Ann Leeds", ("Ann", "Leeds")), "<PERSON> LEEDS", True),
        (CanaryValue("en", "PERSON", "Ann Leeds", ("Ann", "Leeds")), "Annex 3, Leedsway", False),
        (CanaryValue("ko", "PERSON", "김민수", ("민수",)), "민수님 안녕하세요", True),
        (CanaryValue("ko", "PERSON", "김민수", ("민수",)), "<PERSON>님 안녕하세요", False),
        (CanaryValue("ko", "KR_RRN", "900101-1234567"), "9001011234567", True),
    ],
)
def test_what_counts_as_surviving(value: CanaryValue, text: str, left: bool) -> None:
    assert survives(value, [text]) is left


def _anonymised(canary: Canary, replace: set[str]) -> dict:
    """A stand-in anonymised row: the values of ``replace`` types replaced everywhere."""

    def scrub(text: str | None) -> str | None:
        for v in canary.values:
            if text is not None and v.entity_type in replace:
                text = text.replace(v.value, f"<{v.entity_type}>")
        return text

    row = canary.row
    messages = [{**m, "content": scrub(m["content"])} for m in json.loads(row["messages"])]
    return {
        "trace_id": row["trace_id"],
        "question": scrub(row["question"]),
        "answer": scrub(row["answer"]),
        "contexts": [scrub(c) for c in row["contexts"]],
        "messages": json.dumps(messages),
    }


def test_the_check_measures_per_type_and_takes_the_canaries_out() -> None:
    planted = batch(3)
    everything = EN | KO
    real = {"trace_id": "t-1", "question": "q", "answer": "a", "contexts": [], "messages": "[]"}
    rows = [_anonymised(c, everything - {"PHONE_NUMBER"}) for c in planted.canaries[1:]]
    quarantined = [{"record": json.dumps({"trace_id": planted.canaries[0].trace_id})}]
    quarantined.append({"record": json.dumps({"trace_id": "t-2"})})
    check, examples, kept = check_canaries(planted, [real, *rows], quarantined, min_recall=1.0)
    assert examples == [real] and [json.loads(q["record"]) for q in kept] == [{"trace_id": "t-2"}]
    recall = check.recall()
    assert recall[("en", "PHONE_NUMBER")] == 0 and recall[("ko", "PHONE_NUMBER")] == 0
    assert recall[("ko", "KR_RRN")] == 1.0
    assert check.unprocessed == 1  # the quarantined canary cannot vouch for its values
    assert recall[("en", "PERSON")] == 15 / 16  # its name is counted as not removed
    assert not check.passed
    line = check.message("2026-11-22T10:00:00Z")
    assert "\n" not in line and "nothing committed" in line and "en PHONE_NUMBER 0.00" in line
    assert f"FLYWHEEL_CURATE__CANARY_SEED={planted.seed} " in line  # to replay the leak
    assert all(
        v.value not in line + json.dumps(check.details())
        for c in planted.canaries
        for v in c.values
    )


def test_a_run_s_gauges_replace_the_last_run_s() -> None:
    first = StageReport("curate")
    first.replace(RECALL_METRIC)
    first.gauge(RECALL_METRIC, 0.5, language="ko", entity_type="PERSON")
    first.gauge("flywheel_other", 1.0)
    state = _fold({"counters": {}, "gauges": {}, "histograms": {}}, first)
    second = StageReport("curate")
    second.replace(RECALL_METRIC)
    second.gauge(RECALL_METRIC, 1.0, language="en", entity_type="PERSON")
    state = _fold(state, second)
    assert list(state["gauges"][RECALL_METRIC].values()) == [1.0]  # Korean is gone
    assert state["gauges"]["flywheel_other"]  # other gauges are updated as before
