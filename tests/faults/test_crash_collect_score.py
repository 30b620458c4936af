"""SIGKILL ``flywheel collect`` and ``flywheel score`` at their writes, then rerun them: the
window's objects (``rollouts/``, ``scores/``) equal a run that never crashed byte for byte,
the collect quarantine table row for row, and nothing is duplicated. The crash points are the
test-only hooks of :mod:`infra.faults` (``FLYWHEEL_TEST_KILL_AT``); the kill is a real
``SIGKILL``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.faults.stages import WINDOW_START, copy_home, flywheel, table_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]
KILLED = -9
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
WINDOW = ("--window-start", WINDOW_START)
PREFIXES = ("rollouts/", "scores/")
SCORES = "scores/window=2026-11-22T10:00:00Z/scores.parquet"


@pytest.fixture(scope="module")
def api_url(prefect_api: None) -> Iterator[str]:
    """The session's Prefect API, handed to every stage process."""
    from prefect.settings import PREFECT_API_URL

    yield str(PREFECT_API_URL.value())


def _spool(home: Path) -> None:
    """30 traces of the window (two malformed records among them) and one feedback event."""
    from infra.settings import Settings
    from infra.store import LocalStore
    from infra.traces import FeedbackEvent, SpoolWriter
    from tests.helpers import make_trace

    settings = Settings(home=home)
    settings.salt()  # kept in the home: every copy keys users as the clean run does
    store = LocalStore(settings.resolved_store_url)
    writer = SpoolWriter(store, writer_id="crash")
    for i in range(30):
        wrong = {"answer": str(i)} if i % 4 == 1 else {}  # some rewards differ
        writer.write_trace(make_trace(i, T0, **wrong))
    writer.write_feedback(FeedbackEvent(trace_id="trace-00003", value=1, at=T0))
    writer.flush()
    store.put("traces/dt=2026-11-22/hour=10/foreign-000001.jsonl", b'{"trace_id": "x"\nnot json\n')


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose spool holds one window of traces, not collected yet."""
    home = tmp_path_factory.mktemp("spooled") / "home"
    _spool(home)
    return home


def objects(home: Path) -> dict[str, bytes]:
    """Every object of the window's stage outputs, by key, with its bytes."""
    from infra.settings import Settings
    from infra.store import LocalStore

    store = LocalStore(Settings(home=home).resolved_store_url)
    return {key: store.get(key) for p in PREFIXES for key in sorted(store.list(p))}


def contents(home: Path) -> dict[str, Any]:
    """What a rerun must reproduce: the window's objects and the quarantined records."""
    return {"objects": objects(home), "quarantine": table_rows(home, "quarantine")}


@pytest.fixture(scope="module")
def clean(template: Path, api_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run without faults: collect then score; the contents after each, and the home as
    it was after collect (where the score scenarios start)."""
    base = tmp_path_factory.mktemp("clean-collect")
    home = copy_home(template, base / "home")
    done = flywheel("collect", *WINDOW, home=home, api_url=api_url)
    assert done.returncode == 0, done.stderr
    collected = contents(home)
    copy_home(home, base / "collected")
    done = flywheel("score", *WINDOW, home=home, api_url=api_url)
    assert done.returncode == 0, done.stderr
    scored = contents(home)
    assert list(collected["objects"]) == ["rollouts/window=2026-11-22T10:00:00Z/batch.parquet"]
    assert SCORES in scored["objects"] and collected["quarantine"], list(scored["objects"])
    return {"collected": collected, "scored": scored, "collected_home": base / "collected"}


def _rows(data: bytes) -> list[dict[str, Any]]:
    import io

    import pyarrow.parquet as pq

    return pq.read_table(io.BytesIO(data)).to_pylist()


@pytest.mark.parametrize(
    "point",
    ["store.put:rollouts/", "catalog.commit:quarantine"],
    ids=["rollouts-write", "quarantine-commit"],
)
def test_collect_killed_then_rerun_equals_a_clean_run(
    point: str, template: Path, clean: dict[str, Any], api_url: str, tmp_path: Path
) -> None:
    home = copy_home(template, tmp_path / "home")

    killed = flywheel("collect", *WINDOW, home=home, api_url=api_url, FLYWHEEL_TEST_KILL_AT=point)
    assert killed.returncode == KILLED, killed.stderr
    assert objects(home) == {}  # nothing of the window is there for score to read

    rerun = flywheel("collect", *WINDOW, home=home, api_url=api_url)
    assert rerun.returncode == 0, rerun.stderr
    assert contents(home) == clean["collected"]
    rows = _rows(next(iter(objects(home).values())))
    assert len({r["trace_id"] for r in rows}) == len(rows)  # nothing duplicated


def test_score_killed_at_its_write_then_rerun_equals_a_clean_run(
    clean: dict[str, Any], api_url: str, tmp_path: Path
) -> None:
    home = copy_home(clean["collected_home"], tmp_path / "home")
    point = "store.put:scores/"

    killed = flywheel("score", *WINDOW, home=home, api_url=api_url, FLYWHEEL_TEST_KILL_AT=point)
    assert killed.returncode == KILLED, killed.stderr
    assert contents(home) == clean["collected"]  # no partial scores for curate to read

    rerun = flywheel("score", *WINDOW, home=home, api_url=api_url)
    assert rerun.returncode == 0, rerun.stderr
    assert contents(home) == clean["scored"]
    scores = _rows(clean["scored"]["objects"][SCORES])
    assert len({r["trace_id"] for r in scores}) == len(scores)  # nothing duplicated
