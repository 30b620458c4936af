"""Stages 2 and 3 on an S3 store (moto on loopback) behind a proxy failing 30 % of the store's
calls (503 before or after the write, dropped connections), Iceberg commits racing a
concurrent writer, and the judge behind a proxy failing 30 % of its calls: the stages finish
with the same scores and tables as a run without faults, nothing duplicated, and every retry
counted (``flywheel_retries_total{operation}``)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.fakes.faults import fault_proxy
from tests.fakes.judge_server import FakeJudgeServer
from tests.faults.stages import T0, table_rows
from tests.procs import s3_server

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.waits]
BUCKET = "flywheel-faults"
OTHER_WINDOW = "2026-11-21T00:00:00Z"  # the concurrent writer's rows


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """These FLYWHEEL_* settings (and a fresh settings cache) inside the block only."""
    from infra.settings import get_settings

    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    get_settings.cache_clear()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        get_settings.cache_clear()


def _other_row(i: int) -> dict[str, Any]:
    from datetime import datetime

    at = datetime.fromisoformat(OTHER_WINDOW.replace("Z", "+00:00"))
    return {
        "trace_id": f"other-{i}",
        "prompt_group": f"g-{i}",
        "question": "q",
        "answer": "a",
        "contexts": [],
        "pii_entities": [],
        "eligible_as": "train",
        "window": OTHER_WINDOW,
        "created_at": at,
    }


@contextmanager
def racing_writer(settings: Any, races: int) -> Iterator[list[int]]:
    """Another writer that commits a row to training_examples just before each of the stage's
    first ``races`` commits to it reaches the catalog: each of those but the first loses the
    race (its base snapshot is stale) and must be redone (the first creates the table's
    partition spec, which an append does not conflict with). Yields the races run so far."""
    from pyiceberg.catalog.sql import SqlCatalog

    from infra.catalog import append_rows, open_catalog

    other = open_catalog(settings)
    done: list[int] = []
    inside = threading.local()
    original = SqlCatalog.commit_table

    def commit_table(self: Any, table: Any, *args: Any, **kwargs: Any) -> Any:
        if (
            len(done) < races
            and table.name()[-1] == "training_examples"
            and not getattr(inside, "on", False)
        ):
            inside.on = True
            try:
                append_rows(other, "training_examples", [_other_row(len(done))])
            finally:
                inside.on = False
            done.append(1)
        return original(self, table, *args, **kwargs)

    SqlCatalog.commit_table = commit_table  # type: ignore[method-assign]
    try:
        yield done
    finally:
        SqlCatalog.commit_table = original  # type: ignore[method-assign]


def run_stages(
    home: Any, store_url: str, s3: str, judge: str, *, faults: Callable[[bool], None]
) -> dict[str, Any]:
    """Plant one collected window, then score and curate it; what the run left behind.
    ``faults(True)`` starts the injected faults for the two stages alone: the window is planted
    and the outcome read back without them (a read of the outcome that met five faults in a row
    failed the test, not a stage: CI-14)."""
    from flows.curate import curate
    from flows.score import score
    from infra.settings import get_settings
    from infra.store import open_store
    from tests.data.pii_corpus import generate, plant_window

    env = {
        "FLYWHEEL_HOME": str(home),
        "FLYWHEEL_CONSENT_MODE": "opt_out",
        "FLYWHEEL_USER_SALT": "fault-suite",  # both runs key users alike
        "FLYWHEEL_STORE_URL": store_url,
        "FLYWHEEL_S3_ENDPOINT_URL": s3,
        "FLYWHEEL_S3_ACCESS_KEY_ID": "testing",
        "FLYWHEEL_S3_SECRET_ACCESS_KEY": "testing",
        "FLYWHEEL_JUDGE__KIND": "llm",
        "FLYWHEEL_JUDGE__BASE_URL": judge,
        "FLYWHEEL_JUDGE__TIMEOUT_S": "2",
        "FLYWHEEL_JUDGE__MAX_RETRIES": "6",
        "FLYWHEEL_JUDGE__SKIP_WHEN_FEEDBACK": "false",
        "FLYWHEEL_CURATE__LANGUAGES": '["en"]',
        "FLYWHEEL_CURATE__MIN_REWARD": "0",
        "FLYWHEEL_CURATE__K_ANONYMITY": "1",
    }
    with environment(**env):
        settings = get_settings()
        store = open_store(settings)
        common = [(f"What is {a}+{a + 7}?", f"user-{a % 10}") for a in range(10, 30)]
        plant_window(store, T0, [*generate(10, seed=3), *common], users=6)
        for key in store.list("scores/"):
            store.delete(key)  # stage 2 scores the window itself
        faults(True)
        score(window_start=T0)
        with racing_writer(settings, races=3) as races:
            curate(window_start=T0)
        faults(False)
        assert len(races) == 3
        return {
            "objects": {k: store.get(k) for k in sorted(store.list("scores/"))},
            "training_examples": table_rows(home, "training_examples"),
            "metrics": {s: json.loads(store.get(f"metrics/{s}.json")) for s in ("score", "curate")},
        }


def test_stages_under_store_judge_and_commit_faults_equal_a_clean_run(
    prefect_api: None, tmp_path: Any
) -> None:
    from infra.retries import RETRIES

    judge_fault = {"kinds": ("slow", "before"), "slow_s": 3.0, "body": b'{"error": "injected"}'}
    with (
        s3_server(BUCKET) as endpoint,
        FakeJudgeServer(delay_s=0.01) as judge,
        fault_proxy(endpoint, rate=0.3, seed=11) as s3,
        fault_proxy(judge.base_url, rate=0.3, seed=12, **judge_fault) as llm,
    ):
        s3.enabled = llm.enabled = False

        def faults(on: bool) -> None:
            s3.enabled = llm.enabled = on

        judge_url = f"{llm.url}/v1"
        clean = run_stages(
            tmp_path / "clean", f"s3://{BUCKET}/clean", s3.url, judge_url, faults=lambda on: None
        )
        before = RETRIES.snapshot()
        faulty = run_stages(
            tmp_path / "faulty", f"s3://{BUCKET}/faulty", s3.url, judge_url, faults=faults
        )
        retries = RETRIES.since(before)

    assert faulty["objects"] == clean["objects"]  # the scores, byte for byte
    assert faulty["training_examples"] == clean["training_examples"]
    ids = [json.loads(r)["trace_id"] for r in faulty["training_examples"]]
    assert len(ids) == len(set(ids)) > 20  # nothing duplicated
    assert sum(s3.faults.values()) > 20 and sum(llm.faults.values()) > 10
    # the two lost races, redone by pyiceberg alone (it counted 2 or more when the commit was
    # also redone around failed file writes: two levels)
    assert retries.get("catalog.commit", 0) == 2
    assert retries.get("judge.chat", 0) >= sum(llm.faults.values())
    assert sum(n for op, n in retries.items() if op.startswith("store.")) >= 10
    counted = faulty["metrics"]["curate"]["counters"]["flywheel_retries_total"]
    assert sum(counted.values()) > 0  # exported with the stage's metrics
