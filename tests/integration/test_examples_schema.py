"""training_examples grows the conversation columns in place (old rows still readable), and a
weekly train run with default settings reads the last 7 days of examples."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from infra.catalog import NAMESPACE, SCHEMAS, append_rows, open_catalog, scan
from infra.keys import window_id
from infra.settings import get_settings
from tasks.demo import domain
from tasks.train.buffer import BufferScope
from tasks.train.pairs import GoldenFilter, select_training_data

pytestmark = pytest.mark.integration

OLD_COLUMNS = [f for f in SCHEMAS["training_examples"] if f.name not in ("workload", "messages")]


def _row(trace: str, at: datetime, answer: str, reward: float, **extra: object) -> dict:
    a, b = next(p for p in domain.training_pairs())
    return {
        "trace_id": trace,
        "prompt_group": trace.split("-")[0],
        "user_key": None,
        "question": f"What is {a}+{b}?",
        "contexts": [domain.calculator_context(a, b)],
        "answer": answer,
        "reward": reward,
        "reward_config_hash": "rc",
        "eligible_as": "train" if reward >= 0.7 else "rejected_only",
        "window": window_id(at.replace(minute=0, second=0, microsecond=0)),
        "created_at": at,
        **extra,
    }


def test_an_old_table_gains_the_new_columns_and_its_rows_stay_readable(
    flywheel_home: Path,
) -> None:
    catalog = open_catalog(get_settings())
    catalog.create_namespace(NAMESPACE)
    old = catalog.create_table(f"{NAMESPACE}.training_examples", schema=pa.schema(OLD_COLUMNS))
    at = datetime.now(UTC) - timedelta(hours=2)
    old_row = _row("old-0", at, "5", 0.9)
    old.append(pa.Table.from_pylist([old_row], schema=pa.schema(OLD_COLUMNS)))

    messages = [{"role": "user", "content": old_row["question"]}]
    append_rows(
        catalog,
        "training_examples",
        [_row("new-0", at, "5", 0.9, workload="calc", messages=json.dumps(messages))],
    )
    rows = {r["trace_id"]: r for r in scan(catalog, "training_examples").to_pylist()}
    assert rows["old-0"]["question"] == old_row["question"]
    assert rows["old-0"]["workload"] is None and rows["old-0"]["messages"] is None
    assert rows["new-0"]["workload"] == "calc" and json.loads(rows["new-0"]["messages"]) == messages


def test_a_weekly_train_run_with_default_settings_reads_the_last_7_days(
    flywheel_home: Path,
) -> None:
    settings = get_settings()
    cfg = settings.train
    assert cfg.buffer_days == 7 and cfg.buffer_windows == 0
    catalog = open_catalog(settings)
    now = datetime.now(UTC)
    rows = []
    for days in (0.1, 3, 6.5, 8, 30):
        at = now - timedelta(days=days)
        group = f"d{days}".replace(".", "_")
        rows += [_row(f"{group}-ok", at, "right", 0.9), _row(f"{group}-bad", at, "0", 0.1)]
    append_rows(catalog, "training_examples", rows)
    # the selection the train flow makes with its settings (flows/train.py)
    sel = select_training_data(
        catalog,
        scope=BufferScope(
            buffer_windows=cfg.buffer_windows,
            buffer_days=cfg.buffer_days,
            workload_days=cfg.workload_buffer_days,
        ),
        min_margin=cfg.min_margin,
        contaminated=GoldenFilter.from_settings(get_settings().reward),
    )
    assert sorted(p["prompt_group"] for p in sel.pairs) == ["d0_1", "d3", "d6_5"]
    assert len(sel.windows) == 3 and sel.counts["read"] == 6
