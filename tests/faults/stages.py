"""Shared by the fault suite: a prepared FLYWHEEL_HOME (a tiny v0 and one planted window),
the ``flywheel`` CLI run as an operator runs it, and the contents a rerun must reproduce."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
WINDOW_START = "2026-11-22T10:00:00+00:00"
# columns that name the run or the moment rather than the data (a rerun is another run)
VOLATILE = {"preference_pairs": {"train_run", "created_at"}, "quarantine": {"at"}}
DATA_TABLES = ("training_examples", "preference_pairs", "consent")

STAGE_ENV = {
    "FLYWHEEL_CONSENT_MODE": "opt_out",
    "FLYWHEEL_TRAIN__BUFFER_DAYS": "0",
    "FLYWHEEL_TRAIN__BUFFER_WINDOWS": "2",
    "FLYWHEEL_TRAIN__MIN_PAIRS": "5",
    "FLYWHEEL_TRAIN__METHOD": "dpo",
    "FLYWHEEL_CURATE__LANGUAGES": '["en"]',  # the planted window is English
}


def stage_env(home: Path, api_url: str, **extra: str) -> dict[str, str]:
    """The environment of a stage process: the session's Prefect API, this home, no leaks."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FLYWHEEL_", "PREFECT_"))}
    return {
        **clean,
        "PYTHONPATH": str(ROOT),
        "PREFECT_API_URL": api_url,
        "FLYWHEEL_HOME": str(home),
        **STAGE_ENV,
        **extra,
    }


def flywheel(*args: str, home: Path, api_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``flywheel ARGS`` in its own process (``returncode == -9`` when a crash point fired)."""
    return subprocess.run(
        [sys.executable, "-m", "deployments.cli", *args],
        cwd=home.parent,
        env=stage_env(home, api_url, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def prepare_home(home: Path) -> None:
    """``home`` with an untrained tiny model as v0 and one planted, scored window at T0."""
    from infra.catalog import get_table, open_catalog
    from infra.serving import models
    from infra.settings import Settings, get_settings
    from infra.store import LocalStore
    from tasks.demo.pretrain import BootstrapConfig, build_model, build_tokenizer
    from tests.data.pii_corpus import generate, plant_window

    saved = {k: os.environ.get(k) for k in ["FLYWHEEL_HOME", *STAGE_ENV]}
    os.environ.update({"FLYWHEEL_HOME": str(home), **STAGE_ENV})
    get_settings.cache_clear()
    try:
        store = LocalStore(Settings(home=home).resolved_store_url)
        staging = home.parent / f"{home.name}-v0"
        tok = build_tokenizer(64)
        build_model(
            BootstrapConfig(n_layer=1, n_embd=32, n_head=2, n_positions=64), tok
        ).save_pretrained(staging)
        tok.save_pretrained(staging)
        models.publish_model_dir(store, "v0", staging)
        common = [(f"What is {a}+{a + 7}?", f"user-{a % 10}") for a in range(10, 40)]
        plant_window(store, T0, [*generate(20, seed=3), *common], users=6)
        catalog = open_catalog(Settings(home=home))
        for table in DATA_TABLES:  # created (and partitioned) up front: a stage's only
            get_table(catalog, table)  # commit to them is then its data commit
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        get_settings.cache_clear()


def copy_home(source: Path, dest: Path) -> Path:
    """A byte-for-byte copy of a prepared home (every scenario starts from the same state)."""
    shutil.copytree(source, dest, symlinks=True)
    return dest


def _normal(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def table_rows(home: Path, table: str) -> list[str]:
    """The table's rows, sorted, as JSON (run-naming columns left out)."""
    from infra.catalog import open_catalog, scan
    from infra.settings import Settings

    rows = scan(open_catalog(Settings(home=home)), table).to_pylist()
    out = [
        json.dumps(
            {k: _normal(v) for k, v in r.items() if k not in VOLATILE.get(table, set())},
            sort_keys=True,
        )
        for r in rows
    ]
    return sorted(out)


def contents(home: Path) -> dict[str, Any]:
    """What a rerun must reproduce: every data table's rows and the listed model versions."""
    from infra.serving import models
    from infra.settings import Settings
    from infra.store import LocalStore

    store = LocalStore(Settings(home=home).resolved_store_url)
    out: dict[str, Any] = {t: table_rows(home, t) for t in DATA_TABLES}
    out["models"] = models.list_versions(store)
    return out
